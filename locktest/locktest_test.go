package locktest_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck"
	"github.com/lockcheck/lockcheck/locktest"
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
