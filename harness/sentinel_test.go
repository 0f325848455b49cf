package harness

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/redis"
	"github.com/lockcheck/lockcheck/backends/sentinel"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/nemesis"
)

// sentinelTopology is a live Sentinel topology of real processes, killed
// when the test ends.
type sentinelTopology struct {
	nodes   []*node
	eps     []backends.Endpoint
	service *sentinel.Service
}

// faultSettings are the defaults with down-after above the sentinels' 1 s
// ping period. At exactly 1 s a sentinel that has just switched to a new
// master may declare it down before its first PING is answered and fail
// over again a second later, which would make which node ends up master a
// matter of luck.
func faultSettings() sentinel.Settings {
	s := sentinel.DefaultSettings()
	s.DownAfter = 1500 * time.Millisecond
	return s
}

func startSentinel(t *testing.T, s sentinel.Settings) *sentinelTopology {
	t.Helper()
	for _, program := range []string{"redis-server", "redis-sentinel"} {
		if _, err := exec.LookPath(program); err != nil {
			t.Fatalf("%s is not installed (run scripts/setup): %v", program, err)
		}
	}
	p := newProcs()
	// The directory is made first so that its removal runs after the kill.
	dir := t.TempDir()
	t.Cleanup(func() { p.killAll(5 * time.Second) })
	nodes, err := startTopology(context.Background(), p, sentinel.Nodes("redis-server", "redis-sentinel", s), dir)
	require.NoError(t, err)
	top := &sentinelTopology{nodes: nodes}
	for _, n := range nodes {
		top.eps = append(top.eps, n.ep)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, sentinel.Ready(ctx, top.eps))
	top.service = sentinel.NewService(top.eps)
	return top
}

func (s *sentinelTopology) node(name string) *node {
	if n := nodeNamed(s.nodes, name); n != nil {
		return n
	}
	panic("no node " + name)
}

// sentinelTargets offers a fault the topology's nodes and its service handle.
type sentinelTargets struct {
	nodeTargets
	service *sentinel.Service
}

func (s sentinelTargets) Service() any { return s.service }

// eventLog keeps nemesis events as "verb target detail".
type eventLog struct {
	mu     sync.Mutex
	events []string
	times  map[string]time.Time // first time of each "verb target"
}

func (r *eventLog) record(verb string, v history.Value) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := verb + " " + v.Target
	if _, seen := r.times[key]; !seen {
		r.times[key] = time.Now()
	}
	r.events = append(r.events, strings.TrimSpace(key+" "+v.Detail))
}

func (r *eventLog) has(event string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e == event {
			return true
		}
	}
	return false
}

func (r *eventLog) at(key string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.times[key]
}

// faultEnv runs the service watcher, as a run does, and returns an Env that
// records both the fault's events and the watcher's.
func (s *sentinelTopology) faultEnv(t *testing.T) (*nemesis.Env, *eventLog) {
	rec := &eventLog{times: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.service.Watch(ctx, rec.record) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	// The watcher first records every node's role.
	require.Eventually(t, func() bool { return rec.has("role redis-0 master") }, 5*time.Second, 10*time.Millisecond)
	return &nemesis.Env{
		Targets:  sentinelTargets{nodeTargets{s.nodes}, s.service},
		Record:   rec.record,
		Rand:     rand.New(rand.NewPCG(1, 2)),
		Patience: time.Second,
	}, rec
}

// failover-kill: the master dies, a replica is promoted and becomes master,
// and the old master comes back as its replica.
func TestFailoverKillPromotesAReplica(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	top := startSentinel(t, faultSettings())
	env, rec := top.faultEnv(t)
	ctx := context.Background()

	require.NoError(t, landedErr(nemesis.FailoverKill(ctx, env)))

	promoted, err := top.service.Master(ctx)
	require.NoError(t, err)
	assert.Contains(t, []string{"redis-1", "redis-2"}, promoted)
	role, err := top.service.Role(ctx, promoted)
	require.NoError(t, err)
	assert.Equal(t, "master", role, "the promoted node answers ROLE as master")
	role, err = top.service.Role(ctx, "redis-0")
	require.NoError(t, err)
	assert.Equal(t, "replica of "+promoted, role, "the restarted old master rejoined as a replica")

	assert.True(t, rec.has("kill redis-0 master"))
	assert.True(t, rec.has("start redis-0 data lost"))
	assert.True(t, rec.has("switch-master "+promoted+" redis-0 -> "+promoted), "the promotion is an event")
	assert.Eventually(t, func() bool { return rec.has("role redis-0 replica of " + promoted) }, 5*time.Second, 20*time.Millisecond,
		"the old master's new role is an event")
	// How long the switch took is this machine's speed, not the fault's
	// correctness (2-3 s with down-after 1.5s on a quiet machine, 10 s seen
	// under a CPU hog): logged, not asserted.
	t.Logf("switch took %s", rec.at("switch-master "+promoted).Sub(rec.at("kill redis-0")))
}

// failover-pause: while the old master is continued and not yet converted,
// two nodes answer ROLE as master.
func TestFailoverPauseLeavesTwoMasters(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	top := startSentinel(t, faultSettings())
	env, rec := top.faultEnv(t)
	ctx := context.Background()

	twoMasters := make(chan bool, 1)
	stop := make(chan struct{})
	go func() {
		seen := false
		defer func() { twoMasters <- seen }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			masters := 0
			for i := 0; i < 3; i++ {
				if r, err := top.service.Role(ctx, sentinel.DataName(i)); err == nil && r == "master" {
					masters++
				}
			}
			seen = seen || masters == 2
		}
	}()
	require.NoError(t, landedErr(nemesis.FailoverPause(ctx, env)))
	close(stop)

	promoted, err := top.service.Master(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, "redis-0", promoted)
	assert.True(t, <-twoMasters, "the continued old master and the promoted replica were both masters for a while")
	role, err := top.service.Role(ctx, "redis-0")
	require.NoError(t, err)
	assert.Equal(t, "replica of "+promoted, role, "the old master was turned into a replica")
	assert.True(t, rec.has("pause redis-0 until a replica is promoted"))
	assert.True(t, rec.has("resume redis-0"))
	assert.True(t, rec.has("switch-master "+promoted+" redis-0 -> "+promoted))
	assert.NotEqual(t, "T", processState(top.node("redis-0").PID()), "the old master runs again")
}

// A master whose replicas are stopped and cut off refuses the lock's SET
// with NOREPLICAS under min-replicas-to-write: a certain refusal, which the
// checker counts apart from a busy lock.
func TestMinReplicasToWriteRefusesTheLock(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	s := sentinel.DefaultSettings()
	s.MinReplicasToWrite = 1
	top := startSentinel(t, s)
	ctx := context.Background()
	lock, err := sentinel.New(redis.Options{Client: backends.Client{TTL: 10 * time.Second, Fence: true}}, sentinel.SentinelAddrs(top.eps))
	require.NoError(t, err)
	defer lock.Close()

	g, err := lock.Acquire(ctx, "lock-0")
	require.NoError(t, err, "with its replicas connected the master grants")
	require.NotNil(t, g.Fence)
	assert.Equal(t, int64(1), *g.Fence)
	_, err = lock.Acquire(ctx, "lock-0")
	assert.ErrorIs(t, err, backends.ErrNotAcquired)
	assert.Equal(t, backends.ErrNotAcquired.Error(), err.Error(), "a held lock is busy, not refused")
	released, err := lock.Release(ctx, "lock-0", g)
	require.NoError(t, err)
	assert.True(t, released)

	for _, name := range top.service.Replicas("redis-0") {
		n := top.node(name)
		require.NoError(t, n.Signal(syscall.SIGSTOP))
		defer n.Signal(syscall.SIGCONT) //nolint:errcheck // teardown kills it anyway
	}
	_, err = top.service.CutReplicas(ctx, "redis-0")
	require.NoError(t, err)
	_, err = lock.Acquire(ctx, "lock-0")
	assert.ErrorIs(t, err, backends.ErrNotAcquired, "a refusal is a certain failure to acquire")
	var refused redis.Refused
	require.True(t, errors.As(err, &refused), "got %v", err)
	assert.True(t, strings.HasPrefix(err.Error(), history.RefusedPrefix))
	assert.Contains(t, err.Error(), "NOREPLICAS")
}

// A run cancelled while failover-pause holds the master stopped continues
// it and leaves no redis-server, sentinel or worker behind. It counts this
// process's children, so it must not run in parallel with other tests.
func TestCancelledFailoverLeavesNothingBehind(t *testing.T) {
	testtier.Long(t)
	cfg := testConfig(t, redis.Correct, "unfenced", []string{"failover-pause"}, time.Minute)
	cfg.Run.Backend = "sentinel"
	cfg.Run.Params = sentinel.DefaultSettings().Params()
	cfg.Interval = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelled := make(chan bool, 1)
	go func() {
		// Cancel once a redis-server of this run is stopped by the fault.
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			for _, pid := range childrenOf(os.Getpid()) {
				comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
				if strings.HasPrefix(string(comm), "redis-server") && processState(pid) == "T" {
					cancel()
					cancelled <- true
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		cancelled <- false
	}()
	out, err := Run(ctx, cfg)
	require.NoError(t, err)
	require.True(t, <-cancelled, "the master was stopped mid-failover when the run was cancelled")
	assert.True(t, out.Interrupted)
	assert.Empty(t, childrenOf(os.Getpid()), "no server, sentinel or worker may outlive the run")
}
