package locktest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck"
	"github.com/lockcheck/lockcheck/locktest"
	"github.com/lockcheck/lockcheck/results"
)

func TestMain(m *testing.M) { locktest.Main(m) }

// leases is a lock service in the memory of one process: a lease per key
// that runs out after the TTL. Its clients in one process share it, and
// it is a correct lock; clients in worker processes each have their own,
// and it is no lock at all.
type leases struct {
	mu   sync.Mutex
	held map[string]lease
	next int
}

type lease struct {
	token string
	until time.Time
}

func newLeases() *leases { return &leases{held: map[string]lease{}} }

func (s *leases) open(c lockcheck.Config) (lockcheck.Lock, error) { return &leaseClient{s, c}, nil }

type leaseClient struct {
	s   *leases
	cfg lockcheck.Config
}

func (l *leaseClient) Acquire(_ context.Context, key string) (lockcheck.Grant, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if h, ok := l.s.held[key]; ok && time.Now().Before(h.until) {
		return lockcheck.Grant{}, lockcheck.ErrNotAcquired
	}
	l.s.next++
	g := lockcheck.Grant{Token: fmt.Sprint(l.s.next), TTL: l.cfg.TTL}
	l.s.held[key] = lease{g.Token, time.Now().Add(l.cfg.TTL)}
	return g, nil
}

func (l *leaseClient) Release(_ context.Context, key string, g lockcheck.Grant) (bool, error) {
	l.cfg.Failpoint.Hit("before-delete")
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.held[key].token != g.Token {
		return false, nil
	}
	delete(l.s.held, key)
	return true, nil
}

func (l *leaseClient) Close() error { return nil }

// verdictOnly stands in for the test a Run fails, so that a test can
// assert on a run meant to find the lock broken.
type verdictOnly struct {
	testing.TB
	failures []string
}

func (v *verdictOnly) Errorf(format string, args ...any) {
	v.failures = append(v.failures, fmt.Sprintf(format, args...))
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    locktest.Options
		verdict string
		failed  []string
	}{
		// Clients in one process share the lock: with no fault it holds.
		{"in-process-no-fault", locktest.Options{InProcess: true, TimeLimit: 2 * time.Second}, "true", nil},
		// A holder stalled before its write past its lease writes while
		// the next holder does: the unfenced resource takes both.
		{"in-process-pause-holder", locktest.Options{InProcess: true, Nemesis: []string{"pause-holder"}, TTL: 300 * time.Millisecond, TimeLimit: 3 * time.Second}, "false", []string{"double_ownership"}},
		// Worker processes each have a lock of their own: every client
		// is granted it at once.
		{"workers-no-shared-lock", locktest.Options{TimeLimit: 2 * time.Second}, "false", []string{"lease_safety", "double_ownership"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &verdictOnly{TB: t}
			res := locktest.Run(v, newLeases().open, tc.opts)
			assert.Equal(t, tc.verdict, res.Verdict, res.Reason)
			for _, c := range tc.failed {
				assert.Contains(t, res.Failed, c)
			}
			assert.FileExists(t, res.Dir+"/report.html")
			if tc.verdict == "true" {
				assert.Empty(t, v.failures)
			} else {
				require.Len(t, v.failures, 1)
				assert.Contains(t, v.failures[0], res.Reason, "the test fails with the verdict's reason")
			}
		})
	}
}

func TestRunRefusesKillInProcess(t *testing.T) {
	// Fatal ends the goroutine: run it in one of its own.
	v := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		locktest.Run(v, newLeases().open, locktest.Options{InProcess: true, Nemesis: []string{"kill-client"}})
	}()
	<-done
	require.Len(t, v.fatals, 1)
	assert.Contains(t, v.fatals[0], "kill-client needs worker processes")
}

type fatalRecorder struct {
	testing.TB
	fatals []string
}

func (f *fatalRecorder) Fatal(args ...any) {
	f.fatals = append(f.fatals, fmt.Sprint(args...))
	runtime.Goexit()
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.fatals = append(f.fatals, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

// changed is leases whose clients acquire through acquire, which calls the
// plain lease client l: a lock that hands out fences, one with no TTL, one
// that fails.
type changed struct {
	*leases
	acquire func(l *leaseClient, ctx context.Context, key string) (lockcheck.Grant, error)
}

func (c changed) open(cfg lockcheck.Config) (lockcheck.Lock, error) {
	l, _ := c.leases.open(cfg)
	return changedClient{l.(*leaseClient), c.acquire}, nil
}

type changedClient struct {
	*leaseClient
	acquire func(l *leaseClient, ctx context.Context, key string) (lockcheck.Grant, error)
}

func (c changedClient) Acquire(ctx context.Context, key string) (lockcheck.Grant, error) {
	return c.acquire(c.leaseClient, ctx, key)
}

// fenced hands out the lease's number as its fence.
func fenced() changed {
	return changed{newLeases(), func(l *leaseClient, ctx context.Context, key string) (lockcheck.Grant, error) {
		g, err := l.Acquire(ctx, key)
		if err == nil {
			fence, _ := strconv.ParseInt(g.Token, 10, 64)
			g.Fence = &fence
		}
		return g, err
	}}
}

// runFatal runs Run in a goroutine of its own, as Fatal ends it, and
// returns what it was fatal about.
func runFatal(t *testing.T, open locktest.Open, opts locktest.Options) []string {
	v := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		locktest.Run(v, open, opts)
	}()
	<-done
	return v.fatals
}

// A fenced run takes its fences from the lock unless told otherwise: a lock
// that does not declare any is refused before the run, with the choice
// that works; one that declares them, or the resource's fences, run.
func TestRunFencedNeedsFences(t *testing.T) {
	fatals := runFatal(t, newLeases().open, locktest.Options{InProcess: true, Workload: "fenced"})
	require.Len(t, fatals, 1)
	assert.Contains(t, fatals[0], "--workload fenced with --fence-source lock: backend TestRunFencedNeedsFences (variant default) hands out no fence")
	assert.Contains(t, fatals[0], "use --fence-source resource")

	for _, tc := range []struct {
		name string
		open locktest.Open
		opts locktest.Options
	}{
		{"resource fences", newLeases().open, locktest.Options{InProcess: true, Workload: "fenced", FenceSource: "resource", TimeLimit: 2 * time.Second}},
		{"the lock's fences", fenced().open, locktest.Options{InProcess: true, Workload: "fenced", Fences: true, TimeLimit: 2 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := locktest.Run(t, tc.open, tc.opts)
			assert.Equal(t, "true", res.Verdict, res.Reason)
		})
	}
}

// noLease grants with no TTL: a lock held until it is released, when it
// says so.
func noLease() changed {
	return changed{newLeases(), func(l *leaseClient, ctx context.Context, key string) (lockcheck.Grant, error) {
		l.cfg.TTL = time.Hour // held until released
		g, err := l.Acquire(ctx, key)
		g.TTL = 0
		return g, err
	}}
}

// A grant with no lease stops the run at the first one, naming Grant.TTL,
// unless the lock declares that it holds a grant until it is released:
// then its clients write.
func TestRunGrantWithoutLease(t *testing.T) {
	fatals := runFatal(t, noLease().open, locktest.Options{InProcess: true})
	require.Len(t, fatals, 1)
	assert.Contains(t, fatals[0], "the lock granted lock-0 with no lease: Grant.TTL is 0s")
	assert.Contains(t, fatals[0], "lockcheck.Backend.LeasesUntilRelease")

	t.Run("held until released", func(t *testing.T) {
		res := locktest.Run(t, noLease().open, locktest.Options{InProcess: true, LeasesUntilRelease: true, TimeLimit: 2 * time.Second})
		assert.Equal(t, "true", res.Verdict, res.Reason)
		got, err := results.ReadResults(res.Dir)
		require.NoError(t, err)
		assert.Positive(t, got.Checks.Linearizability.Operations, "the clients wrote")
	})
}

// flakyError is what a client whose every statement a pooler refuses sees.
const flakyError = `ERROR: prepared statement "stmtcache_5c8e2a1f" already exists (SQLSTATE 42P05)`

// flaky fails 99 acquires of 100 with an error that leaves the outcome
// unknown.
func flaky() changed {
	var n atomic.Int64
	return changed{newLeases(), func(l *leaseClient, ctx context.Context, key string) (lockcheck.Grant, error) {
		if n.Add(1)%100 != 0 {
			return lockcheck.Grant{}, errors.New(flakyError)
		}
		return l.Acquire(ctx, key)
	}}
}

// A lock whose acquires fail 99 times in 100 tested almost nothing: the
// verdict is unknown, and its reason names the error first.
func TestRunMostlyFailingLockIsUnknown(t *testing.T) {
	v := &verdictOnly{TB: t}
	res := locktest.Run(v, flaky().open, locktest.Options{InProcess: true, TimeLimit: 2 * time.Second})
	assert.Equal(t, "unknown", res.Verdict, res.Reason)
	assert.True(t, strings.HasPrefix(res.Reason, "Most acquires got no answer, so the run tested almost nothing: "), res.Reason)
	assert.Contains(t, res.Reason, "most often (")
	assert.Contains(t, res.Reason, flakyError)
	require.Len(t, v.failures, 1)
}

// A failing test says where its report is once, and how to keep it.
func TestRunPrintsTheReportOnce(t *testing.T) {
	v := &logRecorder{verdictOnly: verdictOnly{TB: t}}
	res := locktest.Run(v, newLeases().open, locktest.Options{TimeLimit: 2 * time.Second})
	require.Equal(t, "false", res.Verdict)
	var mentions int
	for _, line := range append(v.logs, v.failures...) {
		mentions += strings.Count(line, res.Dir)
	}
	assert.Equal(t, 1, mentions, "logs %q, failures %q", v.logs, v.failures)
	require.Len(t, v.failures, 1)
	assert.Contains(t, v.failures[0], "report: "+res.Dir+"/report.html; removed when the test ends: run go test -artifacts to keep it")
}

// logRecorder also records what Run logs.
type logRecorder struct {
	verdictOnly
	logs []string
}

func (l *logRecorder) Logf(format string, args ...any) {
	l.logs = append(l.logs, fmt.Sprintf(format, args...))
}
