package harness

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/redis"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/procstate"
	"github.com/lockcheck/lockcheck/nemesis"
)

// The harness starts workers and the nodes that are lockcheck itself (etcd
// members, ZooKeeper launchers) by running its own
// executable; in tests that is the test binary, which becomes one here.
func TestMain(m *testing.M) {
	if RunWorkerFromEnv() || catalog.RunNodeFromEnv() {
		return
	}
	os.Exit(m.Run())
}

func requireRedis(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed (run scripts/setup): %v", err)
	}
}

// childrenOf lists the live processes whose parent is pid.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name may hold spaces; the fields after its closing
		// parenthesis are state, then ppid.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

func processState(pid int) string {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "gone"
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return fields[0]
}

type nodeTargets struct{ nodes []*node }

func (n nodeTargets) Holder() (nemesis.Client, bool)       { return nil, false }
func (n nodeTargets) Clients() []nemesis.Client            { return nil }
func (n nodeTargets) Service() any                         { return nil }
func (n nodeTargets) Lookup(string) (nemesis.Target, bool) { return nil, false }
func (n nodeTargets) Nodes() []nemesis.Target {
	out := make([]nemesis.Target, len(n.nodes))
	for i, x := range n.nodes {
		out[i] = x
	}
	return out
}

// startRedisNode starts one redis-server through the process runtime and
// kills it when the test ends.
func startRedisNode(t *testing.T) *node {
	t.Helper()
	requireRedis(t)
	p := newProcs()
	// The directory is made first so that its removal runs after the kill.
	dir := t.TempDir()
	t.Cleanup(func() { p.killAll(5 * time.Second) })
	nodes, err := startTopology(context.Background(), p, []backends.NodeSpec{redis.Node("redis-0", "")}, dir)
	require.NoError(t, err)
	t.Cleanup(nodes[0].Stop)
	return nodes[0]
}

// A paused redis-server answers nothing until it is continued.
func TestPauseNodeStopsTheServer(t *testing.T) {
	n := startRedisNode(t)

	var events []string
	env := &nemesis.Env{
		Targets: nodeTargets{[]*node{n}},
		Record:  func(f string, v history.Value) { events = append(events, f+" "+v.Target) },
		Pause:   1500 * time.Millisecond,
	}
	done := make(chan error, 1)
	go func() { done <- pauseFirstNode(env) }()

	rdb := goredis.NewClient(&goredis.Options{Addr: n.addr(), MaxRetries: -1, ReadTimeout: 300 * time.Millisecond, DialTimeout: 300 * time.Millisecond})
	defer rdb.Close()
	require.Eventually(t, func() bool { return processState(n.PID()) == "T" }, time.Second, 10*time.Millisecond, "redis-server should be stopped")
	assert.Error(t, rdb.Ping(context.Background()).Err(), "a stopped server must not answer")
	require.NoError(t, <-done)
	assert.NoError(t, rdb.Ping(context.Background()).Err(), "the server answers again once continued")
	assert.Equal(t, []string{"pause redis-0", "resume redis-0"}, events)
}

func pauseFirstNode(env *nemesis.Env) error {
	env.Rand = rand.New(rand.NewPCG(1, 2))
	return landedErr(nemesis.PauseNode(context.Background(), env))
}

func testConfig(t *testing.T, variant, workload string, faults []string, limit time.Duration) Config {
	ttl := 500 * time.Millisecond
	return Config{
		Run: history.RunConfig{
			Backend: "redis", Variant: variant, Workload: workload, FenceSource: "lock",
			Nemesis: faults, Seed: 1, Clients: 4, Keys: 1,
		},
		Out: t.TempDir(), TTL: ttl, Limit: limit, Pause: 2 * ttl, Interval: 2 * ttl,
		Think: "10ms-30ms", Retry: 10 * time.Millisecond, OpTimeout: time.Second,
	}
}

// A history header's durations are derived from the typed ones, the lease
// the backend grants beside the TTL asked for; a scenario's timeline has no
// interval between faults.
func TestRecordDerivesTheHeaderDurations(t *testing.T) {
	cfg := Config{
		Run: history.RunConfig{Backend: "etcd", Seed: 7}, TTL: 500 * time.Millisecond, Lease: time.Second,
		Limit: time.Hour, Pause: 2 * time.Second, Interval: 3 * time.Second,
	}
	got := cfg.record(10 * time.Minute)
	assert.Equal(t, history.RunConfig{
		Backend: "etcd", Seed: 7, TTLms: 500, LeaseMs: 1000, TimeLimitMs: 600_000, PauseMs: 2000, NemesisEveryMs: 3000,
	}, got)
	cfg.Script = []nemesis.Action{}
	assert.Zero(t, cfg.record(time.Minute).NemesisEveryMs)
}

// A run cancelled (Ctrl-C) while a client is stopped still heals and tears
// everything down, and leaves its history behind.
func TestCancelledRunLeavesNothingBehind(t *testing.T) {
	requireRedis(t)
	cfg := testConfig(t, redis.Correct, "unfenced", []string{"pause-client"}, time.Minute)
	cfg.Pause = 30 * time.Second // the client is still stopped when the run is cancelled
	cfg.Interval = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		// Cancel once a client is stopped by the nemesis.
		defer close(stopped)
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			for _, pid := range childrenOf(os.Getpid()) {
				if processState(pid) == "T" {
					cancel()
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
	}()
	out, err := Run(ctx, cfg)
	<-stopped
	require.NoError(t, err)
	assert.True(t, out.Interrupted)
	assert.Empty(t, childrenOf(os.Getpid()), "no server or worker may outlive the run")

	h, err := history.ReadFile(filepath.Join(out.Dir, "history.jsonl"))
	require.NoError(t, err)
	var paused, ended bool
	for _, e := range h.Events {
		paused = paused || e.F == history.NemPause
		ended = ended || (e.F == history.NemRunEnd && e.Value != nil && e.Value.Detail == "interrupted")
	}
	assert.True(t, paused, "the pause is in the history")
	assert.True(t, ended, "the history records that the run was interrupted")
}

// pause-holder stops the client that holds the lock at the moment after its
// lease check, and the client really is stopped (state T) while it holds it.
func TestPauseHolderStopsTheHolder(t *testing.T) {
	requireRedis(t)
	cfg := testConfig(t, redis.Correct, "unfenced", []string{"pause-holder"}, 3*time.Second)
	cfg.Interval = time.Second
	sawStopped := make(chan bool, 1)
	go func() {
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			for _, pid := range childrenOf(os.Getpid()) {
				if processState(pid) == "T" {
					sawStopped <- true
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		sawStopped <- false
	}()
	out, err := Run(context.Background(), cfg)
	require.NoError(t, err)
	assert.True(t, <-sawStopped, "a worker process was stopped by SIGSTOP")
	h, err := history.ReadFile(filepath.Join(out.Dir, "history.jsonl"))
	require.NoError(t, err)
	var pause *history.Event
	for i, e := range h.Events {
		if e.F == history.NemPause {
			pause = &h.Events[i]
			break
		}
	}
	require.NotNil(t, pause, "a pause is recorded")
	assert.Equal(t, "before-write", pause.Value.Failpoint)
	assert.Regexp(t, `^c\d+$`, pause.Value.Target)
	assert.Empty(t, childrenOf(os.Getpid()))
}

// A missing server binary is a clear error before anything starts.
func TestPreflightNamesAMissingBinary(t *testing.T) {
	cfg := testConfig(t, redis.Correct, "unfenced", nil, time.Second)
	cfg.Programs = catalog.Programs{"redis-server": "/nonexistent/redis-server"}
	_, err := Preflight(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/nonexistent/redis-server not found")
	assert.Contains(t, err.Error(), "--redis-server")
}

// SIGSTOP through the harness returns only once every thread of the child
// has stopped, so nothing the child does can slip in after a pause begins.
func TestSigstopWaitsUntilEveryThreadStopped(t *testing.T) {
	n := startRedisNode(t)
	for i := 0; i < 20; i++ {
		require.NoError(t, n.Signal(syscall.SIGSTOP))
		stopped, err := procstate.AllThreadsStopped(n.PID())
		require.NoError(t, err)
		require.True(t, stopped, "every thread of redis-server is stopped when Signal returns")
		require.NoError(t, n.Signal(syscall.SIGCONT))
	}
}

// startService starts backend's topology as a run does and waits up to
// ready for the backend to say it serves. Every node is killed, and shown
// to be gone, when the test ends.
func startService(t *testing.T, backend string, ready time.Duration) ([]*node, []backends.Endpoint, any, time.Duration) {
	t.Helper()
	b, _, err := catalog.Lookup(backend, "")
	require.NoError(t, err)
	p := newProcs()
	dir := t.TempDir() // made first, so that its removal runs after the kill
	begin := time.Now()
	nodes, err := startTopology(context.Background(), p, b.Nodes(nil, nil), dir)
	require.NoError(t, err)
	eps := make([]backends.Endpoint, len(nodes))
	for i, n := range nodes {
		eps[i] = n.ep
	}
	t.Cleanup(func() {
		var pids []int
		for _, n := range nodes {
			pids = append(pids, n.PID())
		}
		p.killAll(5 * time.Second)
		for _, pid := range pids {
			assert.Equal(t, "gone", processState(pid), "%s process %d outlived the test", backend, pid)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), ready)
	defer cancel()
	require.NoError(t, b.Ready(ctx, eps))
	return nodes, eps, b.Service(eps), time.Since(begin)
}
