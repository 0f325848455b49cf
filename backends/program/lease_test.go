package program

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/redis"
)

// redisLease reads a key's lease on the Redis at addr, as client check
// does on the redis topology.
func redisLease(t *testing.T, addr string) func(context.Context, string) (ServiceLease, error) {
	rdb, err := redis.New(redis.Options{Addr: addr})
	require.NoError(t, err)
	t.Cleanup(func() { rdb.Close() })
	return func(ctx context.Context, key string) (ServiceLease, error) {
		held, value, left, err := rdb.Lease(ctx, key)
		return ServiceLease{Held: held, Holder: value, Left: left}, err
	}
}

// A program that lies about its lease fails the check with the rule of
// its lie, whether or not the check can read the service's lease (then a
// second client's acquire inside the claimed lease is granted); the same
// program telling no lie conforms. One that dies on its own between steps
// is named for that (it runs until its stdin closes), and the timeout's
// stop, which comes next, acts on the program started again, so no
// spurious rule follows.
func TestCheckFailsLeaseLies(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skip("no " + python)
	}
	addr := startRedis(t)
	script := filepath.Join("testdata", "liar.py")
	cases := []struct {
		mode   string
		read   bool // the check reads the service's lease
		rule   string
		notToo string
	}{
		{mode: "honest", read: true},
		{mode: "honest"},
		{mode: "overclaim", read: true, rule: RuleLease},
		{mode: "overclaim", rule: RuleLease},
		{mode: "fakerenew", read: true, rule: RuleRenewal},
		{mode: "fakerenew", rule: RuleRenewal},
		{mode: "fakeextend", read: true, rule: RuleRenewal},
		{mode: "fakeextend", rule: RuleRenewal},
		{mode: "wallclock", read: true, rule: RuleSentNs},
		{mode: "cputime", read: true, rule: RuleSentNs},
		{mode: "dies", read: true, rule: RuleExit, notToo: RuleTime},
	}
	got := make([][]Failure, len(cases))
	var wg sync.WaitGroup
	// Three at a time: a dozen 300 ms leases at once on a loaded machine
	// run out under their honest holders.
	slots := make(chan struct{}, 3)
	for i, c := range cases {
		// Checks at once on a loaded machine: their programs start slowly.
		check := conformanceWith(t.TempDir(), []string{python, script, c.mode}, []string{addr}, 10*time.Second)
		if c.read {
			check.Lease = redisLease(t, addr)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			got[i] = check.Check(bg)
		}()
	}
	wg.Wait()
	for i, c := range cases {
		name := c.mode
		if !c.read {
			name += "/refusal-only"
		}
		t.Run(name, func(t *testing.T) {
			var rules []string
			for _, f := range got[i] {
				rules = append(rules, f.Rule)
			}
			if c.rule == "" {
				assert.Empty(t, got[i])
				return
			}
			assert.Contains(t, rules, c.rule, "failures: %v", got[i])
			if c.notToo != "" {
				assert.NotContains(t, rules, c.notToo, "failures: %v", got[i])
			}
		})
	}
}

// Cancelling the check's context ends it at once, with the programs
// killed, however long the lease it waits out.
func TestCheckEndsWithItsContext(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skip("no " + python)
	}
	addr := startRedis(t)
	check := conformance(t, []string{python, filepath.Join("testdata", "liar.py"), "overclaim"}, []string{addr})
	var lock *Lock
	open := check.Open
	check.Open = func(slot string, fps []string, fp backends.Failpoint) (*Lock, error) {
		l, err := open(slot, fps, fp)
		if slot == "c0" {
			lock = l
		}
		return l, err
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan []Failure)
	go func() { done <- check.Check(ctx) }()
	time.Sleep(2 * time.Second) // inside the 6 s lease the program claims
	cancel()
	start := time.Now()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("the check went on for a second after its context was cancelled")
	}
	assert.Less(t, time.Since(start), 500*time.Millisecond)
	require.NotNil(t, lock)
	lock.mu.Lock()
	defer lock.mu.Unlock()
	assert.Nil(t, lock.cur, "the program was killed")
}
