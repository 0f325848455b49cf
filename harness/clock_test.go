package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/redlock"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/nemesis"
)

// clockTargets offers the nemesis a topology's nodes and its service handle
// handle, with no clients.
type clockTargets struct {
	nodes   []*node
	service any
}

func (c clockTargets) Holder() (nemesis.Client, bool) { return nil, false }
func (c clockTargets) Clients() []nemesis.Client      { return nil }
func (c clockTargets) Service() any                   { return c.service }
func (c clockTargets) Nodes() []nemesis.Target {
	out := make([]nemesis.Target, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n
	}
	return out
}

func (c clockTargets) Lookup(name string) (nemesis.Target, bool) {
	for _, n := range c.nodes {
		if n.Name() == name {
			return n, true
		}
	}
	return nil, false
}

// clockRecorder collects the nemesis events of a fault.
type clockRecorder struct {
	mu     sync.Mutex
	events []history.Event
}

func (r *clockRecorder) record(f string, v history.Value) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, history.Event{Time: history.Now(), F: f, Value: &v})
}

// first waits for the first event of verb.
func (r *clockRecorder) first(t *testing.T, verb string) history.Event {
	t.Helper()
	var found history.Event
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.events {
			if e.F == verb {
				found = e
				return true
			}
		}
		return false
	}, 5*time.Second, time.Millisecond, "no %s event", verb)
	return found
}

// redlockNodes starts three Redlock masters under faked clocks (a minority
// of one) and returns them with a client of each.
func redlockNodes(t *testing.T) ([]*node, map[string]*goredis.Client, any) {
	t.Helper()
	requireRedis(t)
	p := newProcs()
	// The directory is made first so that its removal runs after the kill.
	dir := t.TempDir()
	t.Cleanup(func() { p.killAll(5 * time.Second) })
	nodes, err := startTopology(context.Background(), p, redlock.Nodes("")[:3], dir)
	require.NoError(t, err)
	t.Cleanup(func() {
		resetClocks(nodes)
		for _, n := range nodes {
			n.Stop()
		}
	})
	clients := map[string]*goredis.Client{}
	eps := make([]backends.Endpoint, len(nodes))
	for i, n := range nodes {
		clients[n.Name()] = goredis.NewClient(&goredis.Options{Addr: n.addr(), MaxRetries: -1})
		t.Cleanup(func() { clients[n.Name()].Close() })
		eps[i] = n.ep
	}
	return nodes, clients, redlock.NewService(eps)
}

func clockEnv(t *testing.T, nodes []*node, service any, rec *clockRecorder, pause time.Duration, params map[string]string) *nemesis.Env {
	settings, err := nemesis.ParseSettings(params)
	require.NoError(t, err)
	return &nemesis.Env{
		Targets: clockTargets{nodes, service}, Record: rec.record, Rand: rand.New(rand.NewPCG(7, 7)),
		Pause: pause, Settings: settings, Patience: time.Second,
	}
}

// landedErr is a fault's error, or one saying why it missed: the tests of
// faults assert that the fault landed.
func landedErr(l nemesis.Landing, err error) error {
	if err == nil && !l.Landed {
		return fmt.Errorf("the fault missed: %s", l.Why)
	}
	return err
}

// setEverywhere sets key with PX ttl on every node.
func setEverywhere(t *testing.T, clients map[string]*goredis.Client, key string, ttl time.Duration) {
	t.Helper()
	for _, rdb := range clients {
		require.NoError(t, rdb.Set(context.Background(), key, "v", ttl).Err())
	}
}

func exists(rdb *goredis.Client, key string) bool {
	n, err := rdb.Exists(context.Background(), key).Result()
	return err == nil && n == 1
}

// A forward jump of +20 s expires a key set with PX 10000 at once on the
// jumped node, and on no other; the offset read back with TIME is +20 s,
// and 0 after the reset.
func TestClockJumpForwardExpiresKeys(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	nodes, clients, service := redlockNodes(t)
	set := time.Now()
	setEverywhere(t, clients, "lock-0", 10*time.Second)
	rec := &clockRecorder{}
	done := make(chan error, 1)
	go func() {
		done <- landedErr(nemesis.ClockSkew(context.Background(), clockEnv(t, nodes, service, rec, 2*time.Second, map[string]string{nemesis.ParamSkew: "20s"})))
	}()
	jump := rec.first(t, history.NemClockJump)
	jumped := jump.Value.Target
	// The jump, not the TTL, expired it: it is gone before its 10 s
	// would have run out on a true clock (the nemesis's pause is 2 s).
	assert.Eventually(t, func() bool { return !exists(clients[jumped], "lock-0") }, 5*time.Second, 5*time.Millisecond,
		"the key on %s must be gone after the jump", jumped)
	assert.Less(t, time.Since(set), 10*time.Second, "the key on %s was gone before its TTL ran out", jumped)
	for name, rdb := range clients {
		if name != jumped {
			assert.True(t, exists(rdb, "lock-0"), "%s was not jumped and keeps its key", name)
		}
	}
	require.NotNil(t, jump.Value.OffsetMs)
	assert.InDelta(t, 20000, *jump.Value.OffsetMs, 100, "TIME on %s reads 20 s ahead", jumped)
	assert.Equal(t, "+20s", jump.Value.Detail)

	require.NoError(t, <-done)
	reset := rec.first(t, history.NemClockReset)
	assert.Equal(t, jumped, reset.Value.Target)
	require.NotNil(t, reset.Value.OffsetMs)
	assert.InDelta(t, 0, *reset.Value.OffsetMs, 100, "the clock is back")
}

// A backward jump of −20 s keeps a key set with PX 10000 past its TTL on the
// jumped node (Redis keeps the absolute expiry time, which the node's clock
// now reaches 20 s late), while it expires on time on the others.
func TestClockJumpBackwardKeepsKeysPastTheirTTL(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	const ttl = 10 * time.Second
	nodes, clients, service := redlockNodes(t)
	set := time.Now()
	setEverywhere(t, clients, "lock-0", ttl)
	rec := &clockRecorder{}
	done := make(chan error, 1)
	go func() {
		done <- landedErr(nemesis.ClockSkew(context.Background(), clockEnv(t, nodes, service, rec, ttl+2*time.Second, map[string]string{nemesis.ParamSkew: "-20s"})))
	}()
	jump := rec.first(t, history.NemClockJump)
	jumped := jump.Value.Target
	require.NotNil(t, jump.Value.OffsetMs)
	assert.InDelta(t, -20000, *jump.Value.OffsetMs, 100, "TIME on %s reads 20 s behind", jumped)

	time.Sleep(time.Until(set.Add(ttl + 500*time.Millisecond)))
	for name, rdb := range clients {
		if name == jumped {
			assert.True(t, exists(rdb, "lock-0"), "%s keeps the key past its TTL", name)
		} else {
			assert.False(t, exists(rdb, "lock-0"), "%s expires the key on time", name)
		}
	}
	require.NoError(t, <-done)
	// Putting the clock back is a forward jump: the overdue key goes.
	assert.Eventually(t, func() bool { return !exists(clients[jumped], "lock-0") }, time.Second, 5*time.Millisecond)
}

// A strobe flips the node's clock between +20 s and the real time while it
// lasts, as TIME on the node shows, and leaves it at the real time.
func TestClockStrobeFlipsTheClock(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	nodes, clients, service := redlockNodes(t)
	rec := &clockRecorder{}
	done := make(chan error, 1)
	go func() {
		done <- landedErr(nemesis.ClockSkew(context.Background(), clockEnv(t, nodes, service, rec, time.Second, map[string]string{
			nemesis.ParamSkew: "20s", nemesis.ParamClockMode: nemesis.ClockStrobe, nemesis.ParamStrobePeriod: "100ms",
		})))
	}()
	jump := rec.first(t, history.NemClockJump)
	assert.Equal(t, "strobe +20s every 100ms", jump.Value.Detail)
	rdb := clients[jump.Value.Target]
	seen := map[int64]bool{} // offsets in whole seconds
	for end := time.Now().Add(800 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if now, err := rdb.Time(context.Background()).Result(); err == nil {
			seen[int64(time.Until(now).Round(time.Second).Seconds())] = true
		}
	}
	assert.Equal(t, map[int64]bool{0: true, 20: true}, seen, "the clock flips between the real time and +20 s")
	require.NoError(t, <-done)
	now, err := rdb.Time(context.Background()).Result()
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), now, 100*time.Millisecond, "the strobe ends at the real time")
}
