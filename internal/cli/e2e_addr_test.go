package cli

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/postgres"
	"github.com/lockcheck/lockcheck/backends/postgres/pgtest"
	"github.com/lockcheck/lockcheck/backends/zookeeper"
	"github.com/lockcheck/lockcheck/internal/testtier"
)

// startRedis starts a redis-server the way a team's staging one would be
// running before lockcheck is pointed at it, and stops it at the end.
func startRedis(t *testing.T) (string, *redis.Client) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	srv := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	require.NoError(t, srv.Start())
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	require.Eventually(t, func() bool { return rdb.Ping(context.Background()).Err() == nil }, 30*time.Second, 50*time.Millisecond)
	return addr, rdb
}

func TestAddrRunsAgainstARunningRedis(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	addr, rdb := startRedis(t)
	// A key of someone else's on the same service is left alone.
	require.NoError(t, rdb.Set(context.Background(), "theirs", "1", 0).Err())

	inv, res, _, landed := runFault(t, "--addr", addr, "--nemesis", "pause-holder,kill-client", "--ttl", "300ms", "--time-limit", "4s")
	assert.Equal(t, addr, res.Config.Params["addr"], "the history records the service it ran against")
	prefix := res.Config.Params["key_prefix"]
	assert.True(t, strings.HasPrefix(prefix, "lockcheck:"), "the default key prefix: %q", prefix)
	if landed {
		assert.GreaterOrEqual(t, res.Checks.DoubleOwnership.Windows, 1, "a paused holder outlives its lease: %s", inv.stdout)
	}
	keys, err := rdb.Keys(context.Background(), "*").Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"theirs"}, keys, "the run deleted its own keys and only them")
}

func TestAddrRefusesNodeFaults(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"pause-node", "kill-restart"} {
		inv := lockcheck("run", "--out", t.TempDir(), "--addr", "127.0.0.1:1", "--nemesis", fault)
		assert.Equal(t, exitUnknown, inv.code)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(inv.stderr), "\n")+1, "one line: %s", inv.stderr)
		assert.Contains(t, inv.stderr, "--addr", "the refusal says why")
	}
}

// startByHand starts every node of backend's own topology as a team's
// service would be running before lockcheck is pointed at it: processes the
// test starts itself on loopback, not a run's, killed when the test ends.
// It returns the nodes' endpoints and specs, and the addresses clients use.
func startByHand(t *testing.T, backend string) ([]backends.Endpoint, []backends.NodeSpec, []string) {
	t.Helper()
	b, _, err := catalog.Lookup(backend, "")
	require.NoError(t, err)
	specs := b.Nodes(catalog.Programs{}, map[string]string{})
	eps := make([]backends.Endpoint, len(specs))
	for i, s := range specs {
		eps[i] = backends.Endpoint{Name: s.Name, Dir: t.TempDir()}
		for range max(1, s.Ports) {
			eps[i].Ports = append(eps[i].Ports, freePort(t))
		}
	}
	for i, s := range specs {
		program, err := exec.LookPath(s.Program)
		require.NoError(t, err)
		cmd := exec.Command(program, s.Args(eps[i], eps)...)
		cmd.Env = append(os.Environ(), s.Env...)
		cmd.Dir = eps[i].Dir
		logf, err := os.Create(filepath.Join(eps[i].Dir, "node.log"))
		require.NoError(t, err)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait(); logf.Close() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i, s := range specs {
		require.Eventually(t, func() bool { return s.Ready(ctx, eps[i].Addr()) == nil }, time.Minute, 100*time.Millisecond, "%s did not start (log in %s)", s.Name, eps[i].Dir)
	}
	if b.Ready != nil {
		require.NoError(t, b.Ready(ctx, eps))
	}
	return eps, specs, b.Addrs(eps)
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// redisKeys lists the keys on every Redis node of a topology.
func redisKeys(t *testing.T, eps []backends.Endpoint, specs []backends.NodeSpec) []string {
	var keys []string
	for i, s := range specs {
		if filepath.Base(s.Program) != "redis-server" {
			continue // a sentinel
		}
		rdb := redis.NewClient(&redis.Options{Addr: eps[i].Addr()})
		k, err := rdb.Keys(context.Background(), "*").Result()
		rdb.Close()
		require.NoError(t, err)
		keys = append(keys, k...)
	}
	return keys
}

// Every backend runs against a service that is already running: lockcheck
// starts no node, runs the client-side faults, and leaves nothing of its
// own on the service.
func TestAddrEveryBackend(t *testing.T) {
	testtier.Long(t)
	for _, tc := range []struct {
		backend string
		// start starts the service; startByHand unless set.
		start func(t *testing.T) ([]backends.Endpoint, []backends.NodeSpec, []string)
		// left lists what the run left on the service.
		left func(t *testing.T, eps []backends.Endpoint, specs []backends.NodeSpec, addrs []string) []string
	}{
		{"sentinel", nil, func(t *testing.T, eps []backends.Endpoint, specs []backends.NodeSpec, _ []string) []string {
			return redisKeys(t, eps, specs)
		}},
		{"redlock", nil, func(t *testing.T, eps []backends.Endpoint, specs []backends.NodeSpec, _ []string) []string {
			return redisKeys(t, eps, specs)
		}},
		{"etcd", nil, func(t *testing.T, _ []backends.Endpoint, _ []backends.NodeSpec, addrs []string) []string {
			cli, err := clientv3.New(clientv3.Config{Endpoints: addrs, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
			require.NoError(t, err)
			defer cli.Close()
			resp, err := cli.Get(context.Background(), "", clientv3.WithPrefix(), clientv3.WithKeysOnly())
			require.NoError(t, err)
			var keys []string
			for _, kv := range resp.Kvs {
				keys = append(keys, string(kv.Key))
			}
			return keys
		}},
		{"zookeeper", nil, func(t *testing.T, _ []backends.Endpoint, _ []backends.NodeSpec, addrs []string) []string {
			conn, _, err := zk.Connect(addrs, 5*time.Second, zk.WithLogger(zkQuiet{}))
			require.NoError(t, err)
			defer conn.Close()
			var left []string
			require.Eventually(t, func() bool {
				ok, _, err := conn.Exists(zookeeper.Root)
				left = nil
				if ok {
					left = append(left, zookeeper.Root)
				}
				return err == nil
			}, 30*time.Second, 100*time.Millisecond)
			return left
		}},
		// A database as it is before lockcheck's first run on it: no
		// fence sequence yet (the run creates it and leaves it, since
		// fences must keep rising across runs).
		{"postgres", func(t *testing.T) ([]backends.Endpoint, []backends.NodeSpec, []string) {
			return nil, nil, []string{pgtest.Start(t)}
		}, func(t *testing.T, _ []backends.Endpoint, _ []backends.NodeSpec, addrs []string) []string {
			conn, err := postgres.Connect(context.Background(), addrs[0], 5*time.Second)
			require.NoError(t, err)
			defer conn.Close(context.Background())
			var held []string
			rows, err := conn.Query(context.Background(), `SELECT pid::text FROM pg_locks WHERE locktype = 'advisory'`)
			require.NoError(t, err)
			defer rows.Close()
			for rows.Next() {
				var pid string
				require.NoError(t, rows.Scan(&pid))
				held = append(held, "advisory lock of backend "+pid)
			}
			return held
		}},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			start := tc.start
			if start == nil {
				start = func(t *testing.T) ([]backends.Endpoint, []backends.NodeSpec, []string) {
					return startByHand(t, tc.backend)
				}
			}
			eps, specs, addrs := start(t)
			inv, res, _, _ := runFault(t, "--backend", tc.backend, "--addr", strings.Join(addrs, ","),
				"--nemesis", "pause-holder,kill-client", "--ttl", "1s", "--time-limit", "8s")
			assert.Equal(t, strings.Join(addrs, ","), res.Config.Params["addr"])
			assert.True(t, strings.HasPrefix(res.Config.Params["key_prefix"], "lockcheck:"))
			assert.Positive(t, res.Checks.Liveness.Grants, "the clients were served: %s", inv.stdout)
			assert.Empty(t, tc.left(t, eps, specs, addrs), "the run deleted what it left: %s", inv.stderr)
		})
	}
}

type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}
