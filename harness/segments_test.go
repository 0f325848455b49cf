package harness

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/etcd"
	"github.com/lockcheck/lockcheck/backends/redis"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/nemesis"
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
	testtier.Long(t)
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

// etcdReleaseFailpoint is the etcd backend with a failpoint inside its
// release, before the key is deleted: kill-client aims there and kills
// the holder in its release, leaving its session's lease on the servers.
const (
	etcdReleaseFailpoint = "etcd-release-failpoint"
	failpointInRelease   = "in-release"
)

func init() {
	b, _, err := catalog.Lookup("etcd", "")
	if err != nil {
		panic(err)
	}
	open := b.Open
	b.Name, b.Flags, b.RunNode = etcdReleaseFailpoint, nil, nil
	b.Failpoints = map[string][]string{b.Variants[0]: {failpointInRelease}}
	b.Open = func(s catalog.Spec, fp backends.Failpoint) (backends.Lock, error) {
		l, err := open(s, fp)
		return releaseFailpoint{l, fp}, err
	}
	catalog.Register(b)
}

// releaseFailpoint is a lock whose release first passes failpointInRelease.
type releaseFailpoint struct {
	backends.Lock
	fp backends.Failpoint
}

func (l releaseFailpoint) Release(ctx context.Context, key string, g backends.Grant) (bool, error) {
	l.fp.Hit(failpointInRelease)
	return l.Lock.Release(ctx, key, g)
}

// A soak on etcd at the default --ttl (500ms, which etcd rounds up to a
// lease of 1s): the holder is killed in its release just before the
// boundary, so its lease stays on the servers until it runs out. The next
// segment must not begin before that lease can have ended: from the
// kill (no keepalive renews it after that), the lease etcd granted.
func TestSegmentBoundaryWaitsOutTheGrantedLease(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	const segment = 4 * time.Second
	ttl := 500 * time.Millisecond
	cfg := Config{
		Run: history.RunConfig{
			Backend: etcdReleaseFailpoint, Variant: etcd.Mutex, Workload: "unfenced", FenceSource: "lock",
			Nemesis: []string{"kill-client"}, Seed: 1, Clients: 1, Keys: 1,
		},
		Out: t.TempDir(), TTL: ttl, Limit: 2 * segment, Segment: segment, Pause: 2 * ttl, Interval: segment,
		Think: "10ms-30ms", Retry: 10 * time.Millisecond, OpTimeout: time.Second,
		// The one client reaches its release within a cycle of the fault.
		Steps: []nemesis.Step{{At: segment - 200*time.Millisecond, Fault: "kill-client", Seed: 1}},
	}
	var dirs []string
	cfg.SegmentDone = func(_ int, dir string) { dirs = append(dirs, dir) }
	_, err := Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Len(t, dirs, 2)

	first, err := history.ReadFile(filepath.Join(dirs[0], results.HistoryFile))
	require.NoError(t, err)
	var (
		kill  *history.Event
		grant = map[string]history.Event{} // each process's latest, by name
		last  = map[string]history.Event{} // each process's last event
	)
	for i, e := range first.Events {
		if e.F == history.FAcquire && e.Type == history.OK {
			grant[e.Process.String()] = e
		}
		if e.Process != history.Nemesis {
			last[e.Process.String()] = e
		}
		if e.F == history.NemKill && e.Value.Failpoint == failpointInRelease {
			kill = &first.Events[i]
		}
	}
	require.NotNil(t, kill, "the holder was killed in its release in the first segment")
	end := last[kill.Value.Target]
	assert.Equal(t, []any{history.FRelease, history.Info}, []any{end.F, end.Type}, "%s's release never completed", kill.Value.Target)
	g, ok := grant[kill.Value.Target]
	require.True(t, ok, "%s held a grant when it was killed", kill.Value.Target)
	lease := time.Duration(g.Value.TTLms) * time.Millisecond
	require.Equal(t, time.Second, lease, "etcd grants a lease of 1s for a TTL of %s", ttl)

	second, err := history.ReadFile(filepath.Join(dirs[1], results.HistoryFile))
	require.NoError(t, err)
	var firstOp *history.Event
	for i, e := range second.Events {
		if e.Process != history.Nemesis {
			firstOp = &second.Events[i]
			break
		}
	}
	require.NotNil(t, firstOp, "the client went on in the second segment")
	ended := kill.Time + int64(lease)
	assert.GreaterOrEqual(t, firstOp.Time, ended,
		"the second segment's first operation came %s after the kill, before the lease of %s the killed holder left could have ended",
		time.Duration(firstOp.Time-kill.Time).Round(time.Millisecond), lease)
}
