package cli

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
