package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/results"
)

// TestGiantLineIsRefusedInBoundedMemory: a history or resource log with a
// line of 2 GiB is refused in one line naming the file, the line and the
// fix, exit 2, with no stack trace, by a lockcheck that never holds more
// than a little of the line (a reader with no limit grew to 7.8 GB on
// such a file and died of it). The files are sparse: they take no disk.
func TestGiantLineIsRefusedInBoundedMemory(t *testing.T) {
	const (
		giant  = 2 << 30   // bytes of the long line
		maxRSS = 200 << 20 // bytes lockcheck may grow to
	)
	header := `{"lockcheck_history":1,"start_time":0,"config":{}}` + "\n"
	event := `{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire","key":"k"}` + "\n"
	tests := []struct {
		name     string
		history  string // history.jsonl before the long line, or all of it
		resource bool   // the long line is resource.jsonl's first
		want     string
	}{
		{"in the history", header + event, false, "history.jsonl line 3: over 1048576 bytes (1 MiB)"},
		{"in the resource log", header + event, true, "resource.jsonl line 1: over 1048576 bytes (1 MiB)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			historyPath := filepath.Join(dir, results.HistoryFile)
			require.NoError(t, os.WriteFile(historyPath, []byte(tt.history), 0o644))
			long := historyPath
			if tt.resource {
				long = filepath.Join(dir, results.ResourceFile)
			}
			f, err := os.OpenFile(long, os.O_WRONLY|os.O_CREATE, 0o644)
			require.NoError(t, err)
			fi, err := f.Stat()
			require.NoError(t, err)
			// The line is the NUL bytes of a hole, with no newline.
			require.NoError(t, f.Truncate(fi.Size()+giant))
			require.NoError(t, f.Close())

			cmd, stdout, stderr := lockcheckProcess(t, "check", dir)
			code := exitCode(t, cmd)
			assert.Equal(t, exitUnknown, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			line := strings.TrimSpace(stderr.String())
			assert.Equal(t, 1, strings.Count(line, "\n")+1, "one line: %q", line)
			assert.Contains(t, line, tt.want)
			assert.Contains(t, line, "cut the file before this line", "the line says what to do")
			assert.NotContains(t, line, "goroutine", "no stack trace")
			usage, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			require.True(t, ok)
			rss := usage.Maxrss << 10 // KiB on Linux
			t.Logf("max RSS of lockcheck check: %d MiB", rss>>20)
			assert.Less(t, rss, int64(maxRSS), "lockcheck check grew to %d MiB", rss>>20)
		})
	}
}

// TestCutResourceLogIsUnknown: lockcheck check of a complete run whose
// resource.jsonl lost its last few lines is unknown, exit 2, and the reason
// names how many accepted writes the log holds and the history shows; the
// log as the run wrote it is true. A log that lacks writes cannot vouch for
// them, and only the log's entries are judged when there is one.
func TestCutResourceLogIsUnknown(t *testing.T) {
	t.Parallel()
	inv, res, dir := runLockcheck(t, "--workload", "fenced", "--nemesis", "none", "--ttl", "1s", "--time-limit", "3s")
	require.Equal(t, exitValid, inv.code, inv.stdout)
	assertCheckAgrees(t, dir, res, exitValid)

	resourcePath := filepath.Join(dir, results.ResourceFile)
	log, err := os.ReadFile(resourcePath)
	require.NoError(t, err)
	lines := bytes.SplitAfter(bytes.TrimSuffix(log, []byte("\n")), []byte("\n"))
	const cut = 3
	require.Greater(t, len(lines), 2*cut, "the run wrote too few entries to cut")
	logged := bytes.Count(log, []byte(`"accepted":true`))
	lost := bytes.Count(bytes.Join(lines[len(lines)-cut:], nil), []byte(`"accepted":true`))
	require.Positive(t, lost, "the entries cut hold an accepted write")
	h, err := history.ReadFile(filepath.Join(dir, results.HistoryFile))
	require.NoError(t, err)
	accepted := 0
	for _, e := range h.Events {
		if e.F == history.FWrite && e.Type == history.OK && (e.Value == nil || e.Value.Accepted == nil || *e.Value.Accepted) {
			accepted++
		}
	}
	holds := strconv.Itoa(logged-lost) + " accepted writes; the history accepted " + strconv.Itoa(accepted)

	tests := []struct {
		name string
		log  []byte
		want string
	}{
		{"the last lines gone", bytes.Join(lines[:len(lines)-cut], nil),
			"the resource log holds " + holds},
		{"the last line cut in half", append(bytes.Join(lines[:len(lines)-cut], nil), lines[len(lines)-cut][:10]...),
			"the resource log's last line is cut off (it holds " + holds + ")"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(resourcePath, tt.log, 0o644))
			again := lockcheck("check", dir)
			assert.Equal(t, exitUnknown, again.code, again.stdout)
			res2, err := results.ReadResults(dir)
			require.NoError(t, err)
			assert.Equal(t, checker.Unknown, res2.Valid)
			assert.Equal(t, checker.StateUnknown, res2.Checks.Resource.State)
			assert.Contains(t, res2.Checks.Resource.StateReason, tt.want)
			assert.Contains(t, res2.Reason, tt.want)
			assert.Contains(t, again.stdout, tt.want, "the summary says why")
		})
	}
}
