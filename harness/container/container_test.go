package container

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/redis"
	"github.com/lockcheck/lockcheck/internal/procstate"
	"github.com/lockcheck/lockcheck/internal/testtier"
)

func TestParseLdd(t *testing.T) {
	out := "\tlinux-vdso.so.1 (0x00007ffd)\n" +
		"\tlibssl.so.3 => /lib/x86_64-linux-gnu/libssl.so.3 (0x00007f50)\n" +
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f50)\n" +
		"\t/lib64/ld-linux-x86-64.so.2 (0x00007f50)\n"
	assert.Equal(t, []string{"/lib/x86_64-linux-gnu/libssl.so.3", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}, parseLdd(out))
	assert.Empty(t, parseLdd("\tnot a dynamic executable\n"))
}

func TestOwnerAlive(t *testing.T) {
	self, err := Owner()
	require.NoError(t, err)
	host, _ := os.Hostname()
	tests := []struct {
		owner string
		alive bool
	}{
		{self, true},
		{host + "/" + strconv.Itoa(os.Getpid()) + "/1", false}, // the pid was reused
		{host + "/999999999/1", false},                         // gone
		{"another-host/1/1", true},                             // not ours to judge
		{"garbage", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.alive, ownerAlive(tt.owner), tt.owner)
	}
}

// engine connects to the local Docker engine, or skips the test saying so.
func engine(t *testing.T) *testcontainers.DockerClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := Connect(ctx, nil)
	if err != nil {
		t.Skipf("SKIPPED: no Docker engine on this machine, so the docker runtime is not tested here: %v", err)
	}
	return cli
}

// redisImage builds lockcheck's redis image from the installed
// redis-server (once: an up-to-date image is kept).
func redisImage(t *testing.T, cli *testcontainers.DockerClient) string {
	t.Helper()
	recipe, err := Recipe(redis.Image, redis.Image.Tag, func(name string) string { return name }, "")
	require.NoError(t, err)
	_, err = Build(context.Background(), cli, recipe, false)
	require.NoError(t, err)
	return redis.Image.Tag
}

// ourObjects counts the containers and networks this test process made.
func ourObjects(t *testing.T, cli *testcontainers.DockerClient) int {
	owner, err := Owner()
	require.NoError(t, err)
	filter := client.Filters{}.Add("label", LabelOwner+"="+owner)
	cs, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: filter})
	require.NoError(t, err)
	ns, err := cli.NetworkList(context.Background(), client.NetworkListOptions{Filters: filter})
	require.NoError(t, err)
	return len(cs.Items) + len(ns.Items)
}

func startRedis(t *testing.T, cli *testcontainers.DockerClient, fakeClock bool) (*Runtime, *Node, *goredis.Client) {
	t.Helper()
	ctx := context.Background()
	rt, err := New(ctx, cli, Options{Images: map[string]string{redis.Image.Kind: redisImage(t, cli)}, Run: fmt.Sprintf("test%d", time.Now().UnixNano()%1e9)})
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	spec := redis.Node("redis-0", "")
	spec.FakeClock = fakeClock
	spec.DataPaths = []string{"dump.rdb"}
	nodes, err := rt.StartTopology(ctx, []backends.NodeSpec{spec}, t.TempDir())
	require.NoError(t, err)
	n := nodes[0]
	rdb := goredis.NewClient(&goredis.Options{Addr: n.Endpoint().Addr(), MaxRetries: -1, ReadTimeout: 300 * time.Millisecond, DialTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	return rt, n, rdb
}

// A node runs as PID 1 of its container on the run's private network, and
// a SIGSTOP sent through the engine stops the server itself.
func TestContainerNodePauses(t *testing.T) {
	testtier.Long(t)
	cli := engine(t)
	rt, n, rdb := startRedis(t, cli, false)
	ctx := context.Background()
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	assert.True(t, rt.subnet.Contains(mustAddr(t, n.Endpoint().Host)), "the node has an address on the run's network")

	require.NoError(t, n.Signal(syscall.SIGSTOP))
	stopped, err := procstate.AllThreadsStopped(n.PID())
	require.NoError(t, err)
	assert.True(t, stopped, "every thread of the server is stopped")
	assert.Error(t, rdb.Get(ctx, "k").Err(), "a paused server answers nothing")

	require.NoError(t, n.Signal(syscall.SIGCONT))
	assert.Equal(t, "v", rdb.Get(ctx, "k").Val())
}

// partition cuts the node off the network; heal brings it back at the
// same address, with its data.
func TestContainerNodePartitionAndHeal(t *testing.T) {
	testtier.Long(t)
	cli := engine(t)
	_, n, rdb := startRedis(t, cli, false)
	ctx := context.Background()
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())

	require.NoError(t, n.Partition(ctx))
	assert.True(t, n.cut, "the node knows it is cut off")
	assert.Error(t, rdb.Get(ctx, "k").Err(), "a partitioned node cannot be reached")
	st, err := n.state(ctx)
	require.NoError(t, err)
	assert.True(t, st.Running, "a partitioned node still runs")

	require.NoError(t, n.Heal(ctx))
	assert.Eventually(t, func() bool { return rdb.Get(ctx, "k").Val() == "v" }, 5*time.Second, 50*time.Millisecond,
		"the healed node answers at its old address with its data")
}

// A restart keeps the address; with wipe the node comes back empty.
func TestContainerNodeRestarts(t *testing.T) {
	testtier.Long(t)
	cli := engine(t)
	_, n, rdb := startRedis(t, cli, false)
	ctx := context.Background()
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, rdb.Save(ctx).Err())
	pid := n.PID()

	require.NoError(t, n.Restart(ctx, false))
	assert.NotEqual(t, pid, n.PID(), "a new server process")
	assert.Equal(t, "v", rdb.Get(ctx, "k").Val(), "a restart without wipe keeps the saved data")

	require.NoError(t, n.Restart(ctx, true))
	assert.ErrorIs(t, rdb.Get(ctx, "k").Err(), goredis.Nil, "a restart with wipe starts empty")
}

// The clock file in the mounted node directory moves the server's wall
// clock inside its container.
func TestContainerNodeClockJumps(t *testing.T) {
	testtier.Long(t)
	cli := engine(t)
	_, n, rdb := startRedis(t, cli, true)
	ctx := context.Background()
	before, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	// 5 s of slack for a container round trip on a starved machine; the
	// jump below is 20 s.
	assert.WithinDuration(t, time.Now(), before, 5*time.Second)

	require.NoError(t, n.SetClock(20*time.Second))
	after, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(20*time.Second), after, 5*time.Second, "TIME reads 20 s ahead")

	require.NoError(t, rdb.Set(ctx, "k", "v", 10*time.Second).Err())
	require.NoError(t, n.SetClock(40*time.Second))
	assert.Eventually(t, func() bool { return rdb.Exists(ctx, "k").Val() == 0 }, 2*time.Second, 20*time.Millisecond,
		"a key with 10 s to live is gone after a 20 s jump")
}

// Close removes every container and the network; a new runtime sweeps the
// leftovers of a lockcheck that died.
func TestContainersRemovedAndLeftoversSwept(t *testing.T) {
	testtier.Long(t)
	cli := engine(t)
	ctx := context.Background()
	before := ourObjects(t, cli)
	rt, _, _ := startRedis(t, cli, false)
	assert.Equal(t, before+2, ourObjects(t, cli), "one container and one network")
	rt.Close()
	assert.Equal(t, before, ourObjects(t, cli), "nothing of the run is left")

	// A leftover: a network labelled with an owner that no longer runs.
	host, _ := os.Hostname()
	dead := map[string]string{LabelOwner: host + "/999999999/1", LabelRun: "crashed"}
	res, err := cli.NetworkCreate(ctx, "lockcheck-test-leftover-"+strconv.Itoa(os.Getpid()), client.NetworkCreateOptions{Labels: dead})
	require.NoError(t, err)
	t.Cleanup(func() { cli.NetworkRemove(ctx, res.ID, client.NetworkRemoveOptions{}) }) //nolint:errcheck // gone already is the point
	n, err := Sweep(ctx, cli)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, 1)
	_, err = cli.NetworkInspect(ctx, res.ID, client.NetworkInspectOptions{})
	assert.True(t, isNotFound(err), "the leftover network is gone: %v", err)
}

// A missing image is an error that names the command building it.
func TestMissingImageNamesTheBuildCommand(t *testing.T) {
	cli := engine(t)
	err := CheckImages(context.Background(), cli, []string{"lockcheck/none:missing"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lockcheck images build")
}

// An image built once is reused; the redis image holds the server, the
// sentinel link and libfaketime.
func TestRedisImageBuiltOnce(t *testing.T) {
	testtier.Long(t)
	cli := engine(t)
	recipe, err := Recipe(redis.Image, redis.Image.Tag, func(name string) string { return name }, "")
	require.NoError(t, err)
	_, err = Build(context.Background(), cli, recipe, false)
	require.NoError(t, err)
	again, err := Build(context.Background(), cli, recipe, false)
	require.NoError(t, err)
	assert.False(t, again.Built, "an up-to-date image is not built again")
	files, err := recipe.files()
	require.NoError(t, err)
	var inside []string
	for _, f := range files {
		inside = append(inside, filepath.Base(f.inside))
	}
	assert.Contains(t, inside, "redis-server")
	assert.Contains(t, inside, "libfaketime.so.1")
	assert.Contains(t, inside, "ld-linux-x86-64.so.2")
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	require.NoError(t, err)
	return a
}

// A topology's containers are created and started together; each gets its
// own address on the run's network and answers there.
func TestContainerTopologyStartsTogether(t *testing.T) {
	testtier.Long(t)
	cli := engine(t)
	ctx := context.Background()
	rt, err := New(ctx, cli, Options{Images: map[string]string{redis.Image.Kind: redisImage(t, cli)}, Run: fmt.Sprintf("test%d", time.Now().UnixNano()%1e9)})
	require.NoError(t, err)
	defer rt.Close()
	var specs []backends.NodeSpec
	for i := 0; i < 5; i++ {
		specs = append(specs, redis.Node(fmt.Sprintf("redis-%d", i), ""))
	}
	nodes, err := rt.StartTopology(ctx, specs, t.TempDir())
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, n := range nodes {
		addr := n.Endpoint().Addr()
		assert.False(t, seen[addr], "%s has an address of its own", n.Name())
		seen[addr] = true
		rdb := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
		assert.NoError(t, rdb.Ping(ctx).Err(), "%s answers at %s", n.Name(), addr)
		rdb.Close()
	}
}
