package main

import (
	"context"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/locktest"
)

// Workers are this test binary started again: a pause stops the lock's
// own code.
func TestMain(m *testing.M) { locktest.Main(m) }

// The two scenarios of this directory, through go test: lockcheck starts a
// redis-server, runs three clients and holds c0 between its release's
// decision and its delete for longer than the TTL. Each test passes when
// the scenario's expectations are met: the GET-then-DEL release is caught
// deleting the next holder's key (lease safety fails), the Lua
// compare-and-delete release deletes nothing of it. The clients run as
// worker processes, which the hold stops with SIGSTOP, and as goroutines
// of the test, which it stalls at the failpoint.
func TestRedisLock(t *testing.T) {
	for _, tc := range []struct {
		scenario  string
		inProcess bool
		broken    bool
	}{
		{"get-del-race.yaml", false, true},
		{"lua-release.yaml", false, false},
		{"get-del-race.yaml", true, true},
		{"lua-release.yaml", true, false},
	} {
		name := tc.scenario
		if tc.inProcess {
			name += "/in-process"
		}
		t.Run(name, func(t *testing.T) {
			res := locktest.Run(t, open, locktest.Options{
				Topology: "redis", Failpoints: []string{beforeDelete}, Scenario: tc.scenario, InProcess: tc.inProcess,
			})
			assert.Equal(t, tc.broken, slices.Contains(res.Failed, "lease_safety"), "lease safety failed: %s", res.Reason)
		})
	}
}

// The lock against a Redis the test started itself, as a team's staging
// one runs: lockcheck starts no node, puts its keys under a prefix of its
// own and deletes them at the end (the lock is a lockcheck.Cleaner), and
// leaves the service's other keys alone.
func TestAgainstARunningRedis(t *testing.T) {
	port := freePort(t)
	srv := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	require.NoError(t, srv.Start())
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	require.Eventually(t, func() bool { return rdb.Set(context.Background(), "theirs", "1", 0).Err() == nil }, 30*time.Second, 50*time.Millisecond)

	// The verdict is true only if the clients were served.
	locktest.Run(t, open, locktest.Options{Addrs: []string{addr}, Failpoints: []string{beforeDelete}, InProcess: true, TimeLimit: 3 * time.Second})
	keys, err := rdb.Keys(context.Background(), "*").Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"theirs"}, keys, "the run deleted its own keys and only them")
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The fixed lock with clients killed while they hold it: each kill is a
// real SIGKILL of a worker process, which comes back as a new one, and the
// killed holder's key expires with its TTL.
func TestLuaReleaseSurvivesKilledHolders(t *testing.T) {
	locktest.Run(t, open, locktest.Options{Topology: "redis", Failpoints: []string{beforeDelete}, Nemesis: []string{"kill-client"}, TimeLimit: 6 * time.Second})
}
