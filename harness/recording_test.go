package harness

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/redis"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/results"
)

// fullDisk is a file that takes budget bytes and then fails as a full disk
// does: the write that crosses the budget is cut short.
type fullDisk struct {
	f      *os.File
	budget int
}

func (d *fullDisk) Write(p []byte) (int, error) {
	if len(p) <= d.budget {
		d.budget -= len(p)
		return d.f.Write(p)
	}
	n, _ := d.f.Write(p[:d.budget])
	d.budget = 0
	return n, &os.PathError{Op: "write", Path: d.f.Name(), Err: syscall.ENOSPC}
}

func (d *fullDisk) Close() error { return d.f.Close() }

// The first failed write of the history or the resource log stops the run
// as its time limit would; the run says which file failed and why, and
// what was recorded is checked to an unknown verdict.
func TestRecordingFailureStopsTheRun(t *testing.T) {
	requireRedis(t)
	for _, tt := range []struct {
		file   string
		budget int
		// incomplete: the history itself failed, so it has no run-end.
		incomplete bool
	}{
		{results.HistoryFile, 6000, true},
		{results.ResourceFile, 1500, false},
	} {
		t.Run(tt.file, func(t *testing.T) {
			const limit = 2 * time.Minute
			cfg := testConfig(t, redis.Correct, "fenced", nil, limit)
			cfg.createLog = func(path string) (io.WriteCloser, error) {
				f, err := createFile(path)
				if err != nil || filepath.Base(path) != tt.file {
					return f, err
				}
				return &fullDisk{f: f.(*os.File), budget: tt.budget}, nil
			}
			start := time.Now()
			out, err := Run(context.Background(), cfg)
			require.NoError(t, err, "a failed recording is an outcome, not an error of Run")
			assert.Less(t, time.Since(start), limit, "the run stopped before its time limit")
			assert.True(t, out.Interrupted)
			require.Error(t, out.RecordingFailed)
			assert.Contains(t, out.RecordingFailed.Error(), "recording "+tt.file+" failed")
			assert.ErrorIs(t, out.RecordingFailed, syscall.ENOSPC)
			assert.Empty(t, childrenOf(os.Getpid()), "no server or worker may outlive the run")

			_, res, err := results.CheckDir(out.Dir, checker.Options{})
			require.NoError(t, err, "both logs are readable with their cut last line")
			assert.Equal(t, checker.Unknown, res.Valid, res.Reason)
			assert.Equal(t, tt.incomplete, res.Incomplete)
			assert.Equal(t, !tt.incomplete, res.Interrupted)
			if !tt.incomplete {
				assert.True(t, strings.Contains(res.InterruptedBy, "recording resource.jsonl failed"), res.InterruptedBy)
			}
		})
	}
}
