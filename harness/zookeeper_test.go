package harness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/zookeeper"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
)

// zkEnsemble is a running three-server ensemble of a test.
type zkEnsemble struct {
	nodes   []*node
	eps     []backends.Endpoint
	service *zookeeper.Ensemble
}

// startZooKeeper starts the ZooKeeper topology as a run does (each server
// is this test binary, which writes zoo.cfg and becomes java, see TestMain)
// and waits until it has a leader.
func startZooKeeper(t *testing.T) (zkEnsemble, time.Duration) {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("java is not installed (run scripts/setup): %v", err)
	}
	nodes, eps, service, took := startService(t, "zookeeper", 60*time.Second)
	return zkEnsemble{nodes: nodes, eps: eps, service: service.(*zookeeper.Ensemble)}, took
}

func (e zkEnsemble) node(name string) *node { return nodeNamed(e.nodes, name) }

// follower names a server that does not lead.
func (e zkEnsemble) follower(t *testing.T) *node {
	t.Helper()
	leader, err := e.service.Leader(context.Background())
	require.NoError(t, err)
	for _, n := range e.nodes {
		if n.Name() != leader {
			return n
		}
	}
	t.Fatal("no follower")
	return nil
}

// lock opens the backend's client on the servers named.
func (e zkEnsemble) lock(t *testing.T, ttl time.Duration, names ...string) *zookeeper.Lock {
	t.Helper()
	var addrs []string
	for _, name := range names {
		addrs = append(addrs, e.node(name).addr())
	}
	l, err := zookeeper.New(zookeeper.Options{Client: backends.Client{TTL: ttl, Fence: true, Timeout: 5 * time.Second}, Servers: addrs})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

func (e zkEnsemble) names() []string {
	var out []string
	for _, n := range e.nodes {
		out = append(out, n.Name())
	}
	return out
}

// Each server is a JVM that lockcheck configured in its node directory and
// that replaced the lockcheck process it was started as.
func TestZooKeeperEnsembleStarts(t *testing.T) {
	testtier.Long(t)
	e, took := startZooKeeper(t)
	t.Logf("three ZooKeeper servers started and elected a leader in %s", took)
	for i, n := range e.nodes {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(n.PID()), "cmdline"))
		require.NoError(t, err)
		assert.Contains(t, string(cmdline), zookeeper.MainClass, "%s runs the server in the process lockcheck started", n.Name())
		assert.FileExists(t, filepath.Join(n.ep.Dir, zookeeper.ConfigFile))
		assert.FileExists(t, filepath.Join(n.ep.Dir, zookeeper.LogFile), "the server logs into its node directory")
		myid, err := os.ReadFile(filepath.Join(n.ep.Dir, zookeeper.DataDir, "myid"))
		require.NoError(t, err)
		assert.Equal(t, strconv.Itoa(i+1)+"\n", string(myid))
	}
	leader, err := e.service.Leader(context.Background())
	require.NoError(t, err)
	assert.NotNil(t, e.node(leader), "the leader is one of the nodes")
}

// The grant promises the session timeout the servers granted, which is the
// TTL asked for clamped to [2, 20] ticks, and carries the lock node's czxid,
// which rises with every grant.
func TestZooKeeperGrantCarriesTheGrantedSessionAndARisingFence(t *testing.T) {
	testtier.Long(t)
	e, _ := startZooKeeper(t)
	ctx := context.Background()
	tests := []struct {
		ttl, want time.Duration
	}{
		{50 * time.Millisecond, 2 * zookeeper.DefaultTick},
		{700 * time.Millisecond, 700 * time.Millisecond},
		{10 * time.Second, 20 * zookeeper.DefaultTick},
	}
	var last int64
	for _, tt := range tests {
		l, g := acquireSession(t, e, tt.ttl)
		assert.Equal(t, tt.want, g.TTL, "ttl %s", tt.ttl)
		assert.Equal(t, tt.want, zookeeper.SessionTimeout(tt.ttl, zookeeper.DefaultTick), "the catalog records what the servers grant")
		require.NotNil(t, g.Fence)
		assert.Greater(t, *g.Fence, last, "the czxid rises with every grant")
		last = *g.Fence

		other := e.lock(t, time.Second, e.names()...)
		_, otherErr := other.Acquire(ctx, "lock-0")
		deleted, err := l.Release(ctx, "lock-0", g)
		if sessionLost(g) {
			// A session of a few ticks can expire on a starved machine
			// before the second client asks; ZooKeeper then rightly lets
			// it in. What this test holds is the granted timeout and the
			// fence, asserted above.
			t.Logf("ttl %s: the session expired before the release (machine too busy for %s); the lock was not held throughout", tt.ttl, g.TTL)
			continue
		}
		assert.ErrorIs(t, otherErr, backends.ErrNotAcquired, "the lock is held")
		require.NoError(t, err)
		assert.True(t, deleted)
	}
}

// acquireSession takes lock-0 on a session asking for ttl. A session of a
// few ticks may not survive its own handshake on a starved machine (the
// client misses a ping and the server closes it, and the client reports
// the grant as refused), so the acquire is retried a few times.
func acquireSession(t *testing.T, e zkEnsemble, ttl time.Duration) (backends.Lock, backends.Grant) {
	t.Helper()
	var err error
	for try := 1; try <= 5; try++ {
		l := e.lock(t, ttl, e.names()...)
		var g backends.Grant
		if g, err = l.Acquire(context.Background(), "lock-0"); err == nil {
			return l, g
		}
		t.Logf("ttl %s, try %d: the session ended before the grant: %v", ttl, try, err)
	}
	require.NoError(t, err, "ttl %s: five sessions ended before their grant", ttl)
	return nil, backends.Grant{}
}

// sessionLost reports whether the client has seen the grant's session end.
func sessionLost(g backends.Grant) bool {
	select {
	case <-g.Lost:
		return true
	default:
		return false
	}
}

// A client cut off from the ensemble (the only server it knows is
// stopped) loses its session: its grant's Lost closes, the leader expires
// the session and deletes its node, and another client gets the lock with
// a higher fence. The first one's release cannot tell an expired session
// from one that was only disconnected (whose close may still delete the
// node): it gives the session up, and its outcome is unknown, never a
// certain "deleted nothing".
func TestZooKeeperExpiredSessionEndsTheGrant(t *testing.T) {
	testtier.Long(t)
	e, _ := startZooKeeper(t)
	ctx := context.Background()
	cut := e.follower(t)
	var others []string
	for _, n := range e.nodes {
		if n != cut {
			others = append(others, n.Name())
		}
	}
	ttl := 500 * time.Millisecond
	first := e.lock(t, ttl, cut.Name())
	g, err := first.Acquire(ctx, "lock-0")
	require.NoError(t, err)

	require.NoError(t, cut.Signal(syscall.SIGSTOP))
	defer cut.Signal(syscall.SIGCONT) //nolint:errcheck // continued below too
	select {
	case <-g.Lost:
	case <-time.After(5 * time.Second):
		t.Fatal("the grant's Lost did not close after its server stopped answering")
	}
	second := e.lock(t, time.Second, others...)
	var g2 backends.Grant
	require.Eventually(t, func() bool {
		g2, err = second.Acquire(ctx, "lock-0")
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "the lock is free once the leader expired the first session")
	assert.Greater(t, *g2.Fence, *g.Fence)

	require.NoError(t, cut.Signal(syscall.SIGCONT))
	deleted, err := first.Release(ctx, "lock-0", g)
	require.Error(t, err, "a release after a disconnection has an unknown outcome")
	assert.NotErrorIs(t, err, backends.ErrNotAcquired, "no certain failure")
	assert.False(t, deleted)
	ok, err := first.Extend(ctx, "lock-0", g)
	require.NoError(t, err)
	assert.False(t, ok)
}

// An extend is answered through the leader, never from a follower's own
// copy alone: a follower goes on serving reads for syncLimit ticks after
// it last heard from the leader, while the leader, were it only cut off
// from this follower, could have expired the session. With the leader
// stopped, the holder's follower cannot confirm the node, so the extend is
// not accepted.
func TestZooKeeperExtendAsksTheLeader(t *testing.T) {
	testtier.Long(t)
	e, _ := startZooKeeper(t)
	ctx := context.Background()
	via := e.follower(t)
	l := e.lock(t, time.Second, via.Name())
	g, err := l.Acquire(ctx, "lock-0")
	require.NoError(t, err)
	ok, err := l.Extend(ctx, "lock-0", g)
	require.NoError(t, err)
	require.True(t, ok, "the holder's extend is accepted while the ensemble is whole")

	leader, err := e.service.Leader(ctx)
	require.NoError(t, err)
	n := e.node(leader)
	require.NoError(t, n.Signal(syscall.SIGSTOP))
	defer n.Signal(syscall.SIGCONT) //nolint:errcheck // continued below too
	ok, err = l.Extend(ctx, "lock-0", g)
	assert.False(t, ok && err == nil, "an extend accepted from %s's own copy, with the leader %s stopped", via.Name(), leader)
	require.NoError(t, n.Signal(syscall.SIGCONT))
}

// pause-leader's effect: while the leader is stopped, the others elect a
// new one (with a higher epoch), and the old one rejoins as a follower.
func TestZooKeeperPausedLeaderIsReplaced(t *testing.T) {
	testtier.Long(t)
	e, _ := startZooKeeper(t)
	ctx := context.Background()
	old, err := e.service.Leader(ctx)
	require.NoError(t, err)
	n := e.node(old)
	require.NoError(t, n.Signal(syscall.SIGSTOP))
	defer n.Signal(syscall.SIGCONT) //nolint:errcheck // continued below too
	var next string
	require.Eventually(t, func() bool {
		next, err = e.service.Leader(ctx)
		return err == nil && next != old
	}, 20*time.Second, 100*time.Millisecond, "the others elect a new leader while %s is stopped", old)
	assert.Equal(t, "T", processState(n.PID()), "the new leader was elected while the old one was still stopped")
	require.NoError(t, n.Signal(syscall.SIGCONT))
	readyCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	require.NoError(t, zookeeper.WaitReady(readyCtx, e.eps), "the old leader rejoins as a follower")
	now, err := e.service.Leader(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, old, now, "a paused leader does not take over again by itself")
}

// kill-restart's effect: a server killed with SIGKILL and started again on
// the same ports reloads the transactions of its first life from its own
// data directory (its log says so), and rejoins the ensemble.
func TestZooKeeperKillRestartKeepsAServersData(t *testing.T) {
	testtier.Long(t)
	e, _ := startZooKeeper(t)
	ctx := context.Background()
	l := e.lock(t, time.Second, e.names()...)
	g, err := l.Acquire(ctx, "lock-0")
	require.NoError(t, err)
	_, err = l.Release(ctx, "lock-0", g)
	require.NoError(t, err)

	victim := e.follower(t)
	pid := victim.PID()
	require.NoError(t, victim.Restart(ctx, false))
	assert.Equal(t, "gone", processState(pid), "the killed server's process is gone")
	assert.NotEqual(t, pid, victim.PID(), "a new process serves the server")
	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, zookeeper.WaitReady(readyCtx, e.eps), "the restarted server rejoins")

	log, err := os.ReadFile(filepath.Join(victim.ep.Dir, zookeeper.LogFile))
	require.NoError(t, err)
	loads := regexp.MustCompile(`highest zxid is 0x([0-9a-f]+)`).FindAllStringSubmatch(string(log), -1)
	require.Len(t, loads, 2, "the log keeps both lives of the server")
	assert.Equal(t, "0", loads[0][1], "the first life started empty")
	assert.NotEqual(t, "0", loads[1][1], "the second life reloaded the transactions of the first from its own data")
}

// The leader cut off with a minority of the clients, through the process
// runtime's proxies: the cut lands on the quorum and election links (the
// servers are told apart by the ids they open those links with), the
// majority elects another leader, and no two sessions hold the lock at
// once.
func TestZooKeeperPartitionMinorityStaysSafe(t *testing.T) {
	testtier.Long(t)
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("java is not installed (run scripts/setup): %v", err)
	}
	cfg := testConfig(t, "", "unfenced", []string{"partition-minority"}, 30*time.Second)
	cfg.Run.Backend = "zookeeper"
	cfg.Run.Params = map[string]string{}
	cfg.TTL = time.Second
	// The majority elects within seconds, but a follower that had just
	// chosen the old leader waits out initLimit (5 s) before it looks
	// again, and the election's notifications back off to seconds apart:
	// the split lasts long enough for the other side to have a leader.
	cfg.Pause, cfg.Interval = 15*time.Second, 2*time.Second
	require.Equal(t, NetworkProxy, networkOf(cfg, nodeSpecs(cfg, mustBackend(t, cfg))))
	out, err := Run(context.Background(), cfg)
	require.NoError(t, err)
	assert.Empty(t, childrenOf(os.Getpid()), "no server or worker outlives the run")

	// The leader is cut from the 2 other servers and 3 of the 4 clients.
	_, landings := requireCutsHealed(t, out.Dir, 2+3)
	assert.True(t, anyLanded(landings), "a step landed")
	_, res, err := results.CheckDir(out.Dir, checker.Options{})
	require.NoError(t, err)
	assert.Zero(t, res.Checks.LeaseSafety.Violations, res.Reason)
	assert.Equal(t, checker.Valid, res.Valid, res.Reason)
}
