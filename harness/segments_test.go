package harness

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/redis"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/results"
)

// A segmented run (a soak) is one run whose history is rotated while its
// clients go on: the same client processes record into every segment, no
// operation crosses a boundary (each segment's history is complete on its
// own), a client the nemesis stopped at a boundary is let go and waited
// for, and each later segment's head carries the highest fence granted
// and the resource's value: its first grant's fence is above the head's,
// and its checks, started from the head, find the fences rising.
func TestSegmentedRunGoesOnAcrossBoundaries(t *testing.T) {
	requireRedis(t)
	for _, tt := range []struct {
		name            string
		fault           string
		limit, segment  time.Duration
		pause, interval time.Duration
	}{
		// A client is often stopped at a boundary.
		{"paused clients", "pause-client", 9 * time.Second, 3 * time.Second, 2 * time.Second, time.Second},
		// A client killed just before a boundary is replaced while the
		// others wait: its replacement starts parked.
		{"killed clients", "kill-client", 6 * time.Second, time.Second, time.Second, 300 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, redis.Correct, "fenced", []string{tt.fault}, tt.limit)
			cfg.Segment, cfg.Pause, cfg.Interval = tt.segment, tt.pause, tt.interval
			assertSegmentsGoOn(t, cfg, int(tt.limit/tt.segment))
		})
	}
}

func assertSegmentsGoOn(t *testing.T, cfg Config, want int) {
	type closed struct {
		n   int
		dir string
	}
	var segments []closed
	cfg.SegmentDone = func(n int, dir string) { segments = append(segments, closed{n, dir}) }
	out, err := Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Len(t, segments, want)
	assert.Equal(t, out.Dir, segments[want-1].dir, "the last segment is the run's directory")

	var (
		highestFence  *int64 // of every grant so far
		lastValue     *int64
		lastProcesses map[history.Process]bool
	)
	for i, seg := range segments {
		n := i + 1
		assert.Equal(t, n, seg.n)
		h, err := history.ReadFile(filepath.Join(seg.dir, results.HistoryFile))
		require.NoError(t, err, "segment %d is a complete history on its own", n)
		log, err := history.ReadResourceLog(filepath.Join(seg.dir, results.ResourceFile))
		require.NoError(t, err)
		var headFence *int64
		if n == 1 {
			assert.Nil(t, h.Header.Head)
		} else {
			require.NotNil(t, h.Header.Head, "segment %d", n)
			assert.Equal(t, n, h.Header.Head.Segment)
			require.Len(t, h.Header.Head.Keys, 1)
			head := h.Header.Head.Keys[0]
			assert.Equal(t, highestFence, head.Fence, "segment %d's head carries the highest fence granted before", n)
			headFence = head.Fence
			assert.Equal(t, lastValue, head.Value, "segment %d's head carries the resource's value", n)
		}
		processes := map[history.Process]bool{}
		ends := 0
		for _, e := range h.Events {
			if e.Process != history.Nemesis {
				processes[e.Process] = true
			}
			if e.F == history.FAcquire && e.Type == history.OK && e.Value.Fence != nil {
				// Within a segment a stopped client may report its grant
				// after later ones; every grant of a segment was asked
				// for after the boundary, so it is above the head's.
				if headFence != nil {
					assert.Greater(t, *e.Value.Fence, *headFence, "segment %d: fences rise across the boundary", n)
				}
				if highestFence == nil || *e.Value.Fence > *highestFence {
					highestFence = history.Int64(*e.Value.Fence)
				}
			}
			if lastValue == nil && e.F == history.FRead && e.Type == history.OK && e.Value.Value != nil {
				// Before any write lands, the resource's value is the
				// one a read found (a segment whose grants were all
				// killed before their writes has no other).
				lastValue = history.Int64(*e.Value.Value)
			}
			if e.F == history.NemRunEnd {
				ends++
				if n < len(segments) {
					assert.Equal(t, history.RunEndSegment, e.Value.Detail)
				}
			}
		}
		assert.Equal(t, 1, ends, "segment %d ends once", n)
		for _, e := range log {
			if e.Accepted {
				lastValue = history.Int64(e.Value)
			}
		}
		if lastProcesses != nil {
			continued := false
			for p := range processes {
				continued = continued || lastProcesses[p]
			}
			assert.True(t, continued, "segment %d: a client of segment %d goes on in it", n, n-1)
		}
		lastProcesses = processes
		res := checker.Check(h, log, checker.Options{})
		assert.True(t, res.Checks.Fencing.Valid, "segment %d: %s", n, res.Reason)
		assert.Zero(t, res.Checks.Resource.StaleWritesAccepted, "segment %d: %s", n, res.Reason)
	}
	for _, pid := range childrenOf(os.Getpid()) {
		t.Errorf("process %d outlived the run", pid)
	}
}
