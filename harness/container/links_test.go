package container

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/internal/testtier"
)

// redisWithClient starts a Redis node and a client of it that dials from
// the first client's own address on the run's network, with a single
// connection, open.
func redisWithClient(t *testing.T) (*Node, *goredis.Client, string) {
	t.Helper()
	rt, n, _ := startRedis(t, engine(t), false)
	addr, err := rt.clientAddr(0)
	require.NoError(t, err)
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}, Timeout: 5 * time.Second}
	rdb := goredis.NewClient(&goredis.Options{
		Addr: n.Endpoint().Addr(), PoolSize: 1, MaxRetries: -1, ReadTimeout: 10 * time.Second,
		Dialer: func(ctx context.Context, network, a string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, a)
		},
	})
	t.Cleanup(func() { rdb.Close() })
	require.NoError(t, rdb.Ping(context.Background()).Err())
	return n, rdb, addr
}

// rules lists the iptables rules of the node's network namespace.
func rules(t *testing.T, n *Node) string {
	t.Helper()
	out, err := exec.Command("nsenter", "-t", strconv.Itoa(n.PID()), "-n", "iptables", "-S").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// A slow link holds the packets from and to the client's address in
// lockcheck's queue: while it is on, the rules are in the node's namespace
// and a round trip takes at least the latency (a lower bound, which a busy
// machine only makes longer); at the heal the rules are gone and the queue
// unbound.
func TestContainerNodeSlowsALink(t *testing.T) {
	testtier.Long(t)
	n, rdb, addr := redisWithClient(t)
	ctx := context.Background()

	const latency = 300 * time.Millisecond
	require.NoError(t, n.Slow(addr, latency, 50*time.Millisecond))
	assert.Contains(t, rules(t, n), "-A INPUT -s "+addr+"/32 -j NFQUEUE --queue-num 7300 --queue-bypass")
	assert.Contains(t, rules(t, n), "-A OUTPUT -d "+addr+"/32 -j NFQUEUE --queue-num 7300 --queue-bypass")
	start := time.Now()
	require.NoError(t, rdb.Ping(ctx).Err(), "a slow link still carries the request")
	assert.GreaterOrEqual(t, time.Since(start), latency, "the request or its reply was held")

	require.NoError(t, n.Slow(addr, 0, 0))
	assert.NotContains(t, rules(t, n), "NFQUEUE", "the heal takes the rules out")
	assert.Nil(t, n.shape.queue, "the heal unbinds the queue")
	require.NoError(t, rdb.Ping(ctx).Err())
}

// A flaky link with a share of 1 resets every connection of the client,
// the open one and each new one; the heal takes the rules and the chain
// out and the client connects again.
func TestContainerNodeResetsAFlakyLink(t *testing.T) {
	testtier.Long(t)
	n, rdb, addr := redisWithClient(t)
	ctx := context.Background()

	require.NoError(t, n.Flaky(addr, 1))
	on := rules(t, n)
	assert.Contains(t, on, "-A INPUT -s "+addr+"/32 -p tcp -j lockcheck-flaky-1")
	assert.Contains(t, on, "-A OUTPUT -d "+addr+"/32 -p tcp -j lockcheck-flaky-1")
	assert.Contains(t, on, "--reject-with tcp-reset")
	assert.Error(t, rdb.Ping(ctx).Err(), "the open connection is reset")
	other, err := net.DialTimeout("tcp", n.Endpoint().Addr(), 5*time.Second)
	require.NoError(t, err, "a link not made flaky connects")
	other.Close()
	dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}, Timeout: 5 * time.Second}
	_, err = dialer.Dial("tcp", n.Endpoint().Addr())
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "a new connection of the flaky link is reset at once")

	// A share of one half: each connection is decided once, so a spared
	// one carries every command, and of 40 some are spared and some not.
	require.NoError(t, n.Flaky(addr, 0.5))
	assert.Contains(t, rules(t, n), "-j lockcheck-flaky-2", "a new fault decides afresh")
	spared, reset := 0, 0
	for range 40 {
		if ok, err := pings(dialer, n.Endpoint().Addr(), 3); ok == 3 {
			spared++
		} else {
			assert.Zero(t, ok, "a connection is reset at its first packet or never: %v", err)
			reset++
		}
	}
	assert.Positive(t, spared, "some connections are spared")
	assert.Positive(t, reset, "some connections are reset")

	require.NoError(t, n.Flaky(addr, 0))
	assert.NotContains(t, rules(t, n), "lockcheck-flaky", "the heal takes the jumps and the chain out")
	conn, err := dialer.Dial("tcp", n.Endpoint().Addr())
	require.NoError(t, err, "the healed link carries a new connection")
	conn.Close()
}

// pings sends k PINGs on a new connection from dialer and counts the
// answers, up to the first error.
func pings(dialer net.Dialer, addr string, k int) (int, error) {
	conn, err := dialer.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	buf := make([]byte, 16)
	for i := range k {
		if _, err := conn.Write([]byte("PING\r\n")); err != nil {
			return i, err
		}
		if _, err := conn.Read(buf); err != nil {
			return i, err
		}
	}
	return k, nil
}
