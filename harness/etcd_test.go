package harness

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockcheck/lockcheck/backends"
	_ "github.com/lockcheck/lockcheck/backends/catalog/withetcd" // the etcd backend
	"github.com/lockcheck/lockcheck/backends/etcd"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/nemesis"
)

// etcdCluster is a running three-member cluster of a test.
type etcdCluster struct {
	nodes   []*node
	eps     []backends.Endpoint
	service *etcd.Cluster
}

// startEtcd starts the etcd topology as a run does (the members are this
// test binary, see TestMain) and waits until it has a leader.
func startEtcd(t *testing.T) (etcdCluster, time.Duration) {
	t.Helper()
	nodes, eps, service, took := startService(t, "etcd", 30*time.Second)
	return etcdCluster{nodes: nodes, eps: eps, service: service.(*etcd.Cluster)}, took
}

func (c etcdCluster) node(name string) *node { return nodeNamed(c.nodes, name) }

// nodeNamed finds a topology's node by name; nil if it has none.
func nodeNamed(nodes []*node, name string) *node {
	for _, n := range nodes {
		if n.Name() == name {
			return n
		}
	}
	return nil
}

// client returns a client of the members named, closed with the test.
func (c etcdCluster) client(t *testing.T, names ...string) *clientv3.Client {
	var addrs []string
	for _, name := range names {
		addrs = append(addrs, c.node(name).addr())
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: addrs, DialTimeout: time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}

// serviceTargets offers a cluster's nodes and its handle to a fault.
type serviceTargets struct {
	nodeTargets
	service any
}

func (s serviceTargets) Service() any { return s.service }

// faultEvents keeps the nemesis events a fault records.
type faultEvents struct {
	mu     sync.Mutex
	events []string
}

func (r *faultEvents) record(f string, v history.Value) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, f+" "+v.Target)
}

func (r *faultEvents) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// How fast the members start is this machine's speed: it is measured by
// BenchmarkTopologyStart, not asserted here.
func TestEtcdClusterStarts(t *testing.T) {
	t.Parallel()
	c, took := startEtcd(t)
	t.Logf("three etcd members started and elected a leader in %s", took)
	for _, n := range c.nodes {
		assert.FileExists(t, filepath.Join(n.ep.Dir, etcd.LogFile), "the member logs into its node directory")
		assert.DirExists(t, filepath.Join(n.ep.Dir, "data", "member"), "the member keeps its data in its node directory")
	}
	leader, err := c.service.Leader(context.Background())
	require.NoError(t, err)
	assert.NotNil(t, c.node(leader), "the leader is one of the nodes")
}

// pause-leader stops the member the cluster names as leader; the others
// elect a new one while it is stopped, and it rejoins when continued.
func TestPauseLeaderElectsANewLeader(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	c, _ := startEtcd(t)
	ctx := context.Background()
	old, err := c.service.Leader(ctx)
	require.NoError(t, err)

	rec := &faultEvents{}
	env := &nemesis.Env{
		Targets:  serviceTargets{nodeTargets{c.nodes}, c.service},
		Record:   rec.record,
		Rand:     rand.New(rand.NewPCG(1, 2)),
		Pause:    4 * time.Second,
		Patience: 2 * time.Second,
	}
	done := make(chan error, 1)
	go func() { done <- landedErr(nemesis.PauseLeader(ctx, env)) }()

	require.Eventually(t, func() bool { return processState(c.node(old).PID()) == "T" }, 2*time.Second, 10*time.Millisecond, "the leader should be stopped")
	var next string
	require.Eventually(t, func() bool {
		next, err = c.service.Leader(ctx)
		return err == nil && next != old
	}, 3*time.Second, 50*time.Millisecond, "the others should elect a new leader while %s is stopped", old)
	assert.Equal(t, "T", processState(c.node(old).PID()), "the new leader was elected while the old one was still stopped")

	require.NoError(t, <-done)
	assert.Equal(t, []string{"pause " + old, "resume " + old}, rec.list())
	readyCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, etcd.WaitReady(readyCtx, c.eps), "the old leader rejoins as a follower")
}

// kill-restart SIGKILLs a member and starts it on the same ports with its
// data: it comes back knowing what was written before the kill.
func TestKillRestartKeepsAMembersData(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	c, _ := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	names := []string{c.nodes[0].Name(), c.nodes[1].Name(), c.nodes[2].Name()}
	_, err := c.client(t, names...).Put(ctx, "lockcheck/probe", "before the kill")
	require.NoError(t, err)

	rec := &faultEvents{}
	env := &nemesis.Env{
		Targets:  serviceTargets{nodeTargets{c.nodes}, c.service},
		Record:   rec.record,
		Rand:     rand.New(rand.NewPCG(1, 2)),
		Settings: nemesis.Settings{RestartDelay: 500 * time.Millisecond},
	}
	pids, stores := map[string]int{}, map[string]uint64{}
	for _, n := range c.nodes {
		pids[n.Name()] = n.PID()
		stores[n.Name()] = storeInode(t, n)
	}
	require.NoError(t, landedErr(nemesis.KillRestart(ctx, env)))
	events := rec.list()
	require.Len(t, events, 2)
	victim := events[0][len("kill "):]
	assert.Equal(t, []string{"kill " + victim, "start " + victim}, events)
	n := c.node(victim)
	assert.Equal(t, "gone", processState(pids[victim]), "the killed member's process is gone")
	assert.NotEqual(t, pids[victim], n.PID(), "a new process serves the member")

	assert.Equal(t, stores[victim], storeInode(t, n), "the member reopened the store it had, not a new one")

	require.NoError(t, etcd.WaitReady(ctx, c.eps), "the restarted member rejoins")
	// A serializable read is answered from the member's own store.
	resp, err := c.client(t, victim).Get(ctx, "lockcheck/probe", clientv3.WithSerializable())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	assert.Equal(t, "before the kill", string(resp.Kvs[0].Value))
}

// storeInode identifies the file of a member's key-value store: a member
// that lost its data would write a new one.
func storeInode(t *testing.T, n *node) uint64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(n.ep.Dir, "data", "member", "snap", "db"))
	require.NoError(t, err)
	return fi.Sys().(*syscall.Stat_t).Ino
}
