package redlock_test

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/nodetest"
	"github.com/lockcheck/lockcheck/backends/redlock"
	"github.com/lockcheck/lockcheck/backends/redsync"
)

// masters starts n independent redis-server processes on loopback and
// returns their nodes and processes; they are killed when the test ends.
func masters(t *testing.T, n int) ([]redlock.Node, []*exec.Cmd) {
	t.Helper()
	nodes := make([]redlock.Node, n)
	cmds := make([]*exec.Cmd, n)
	for i := range nodes {
		addr, cmd := nodetest.Redis(t)
		nodes[i] = redlock.Node{Name: redlock.NodeName(i), Addr: addr}
		cmds[i] = cmd
	}
	return nodes, cmds
}

// holders counts the nodes on which key holds token.
func holders(t *testing.T, nodes []redlock.Node, key, token string) int {
	t.Helper()
	n := 0
	for _, node := range nodes {
		rdb := goredis.NewClient(&goredis.Options{Addr: node.Addr, MaxRetries: -1})
		v, err := rdb.Get(context.Background(), key).Result()
		rdb.Close()
		if err == nil && v == token {
			n++
		}
	}
	return n
}

type client struct {
	name string
	open func(redlock.Options) (backends.Lock, error)
}

var clients = []client{
	{"redlock", func(o redlock.Options) (backends.Lock, error) { return redlock.New(o) }},
	{"redsync", func(o redlock.Options) (backends.Lock, error) { return redsync.New(o) }},
}

// Both Redlock clients on five live masters: a grant holds a majority and
// carries its validity deadline; a second client is refused and keeps no key
// anywhere; a release frees every node.
func TestGrantRefuseRelease(t *testing.T) {
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			nodes, _ := masters(t, redlock.NodeCount)
			opts := redlock.Options{Client: backends.Client{TTL: time.Second, Fence: true}, Nodes: nodes}
			a, err := c.open(opts)
			require.NoError(t, err)
			defer a.Close()
			b, err := c.open(opts)
			require.NoError(t, err)
			defer b.Close()
			ctx := context.Background()

			start := time.Now()
			g, err := a.Acquire(ctx, "lock-0")
			require.NoError(t, err)
			assert.Equal(t, redlock.NodeCount, holders(t, nodes, "lock-0", g.Token), "every live node grants")
			assert.WithinRange(t, g.Deadline, start.Add(time.Second-redlock.Drift(time.Second, 0.01)-10*time.Millisecond), start.Add(time.Second))
			require.NotNil(t, g.Fence)

			_, err = b.Acquire(ctx, "lock-0")
			require.ErrorIs(t, err, backends.ErrNotAcquired)

			deleted, err := a.Release(ctx, "lock-0", g)
			require.NoError(t, err)
			assert.True(t, deleted)
			assert.Zero(t, holders(t, nodes, "lock-0", g.Token))

			g2, err := b.Acquire(ctx, "lock-0")
			require.NoError(t, err, "the lock is free again")
			require.NotNil(t, g2.Fence)
			assert.Greater(t, *g2.Fence, *g.Fence, "the INCR fence rose while no node restarted")
		})
	}
}

// With a minority of the masters stopped by SIGSTOP a grant lands on the bare
// majority, and the round waits out the node timeout, which the validity
// pays for. With a majority stopped the acquire is refused and the reachable
// nodes keep nothing: a lost round is released everywhere.
func TestStoppedNodes(t *testing.T) {
	// Long enough for a running node to answer on a loaded machine, short
	// against the 1 s TTL.
	const nodeTimeout = 200 * time.Millisecond
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			nodes, cmds := masters(t, redlock.NodeCount)
			lock, err := c.open(redlock.Options{Client: backends.Client{TTL: time.Second}, Nodes: nodes, NodeTimeout: nodeTimeout})
			require.NoError(t, err)
			defer lock.Close()
			ctx := context.Background()
			stop := func(i int) { require.NoError(t, cmds[i].Process.Signal(syscall.SIGSTOP)) }
			cont := func(i int) { require.NoError(t, cmds[i].Process.Signal(syscall.SIGCONT)) }

			stop(3)
			stop(4)
			start := time.Now()
			g, err := lock.Acquire(ctx, "lock-0")
			elapsed := time.Since(start)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, elapsed, nodeTimeout, "the round waits for the stopped nodes")
			assert.Equal(t, 3, holders(t, nodes[:3], "lock-0", g.Token), "a bare majority")
			assert.WithinDuration(t, start.Add(time.Second-redlock.Drift(time.Second, 0.01)), g.Deadline, elapsed+10*time.Millisecond)
			_, err = lock.Release(ctx, "lock-0", g)
			require.NoError(t, err, "a majority answered the release")

			stop(2)
			_, err = lock.Acquire(ctx, "lock-0")
			require.ErrorIs(t, err, backends.ErrNotAcquired)
			for i := range 2 {
				n, err := goredis.NewClient(&goredis.Options{Addr: nodes[i].Addr}).Exists(ctx, "lock-0").Result()
				require.NoError(t, err)
				assert.Zero(t, n, "%s keeps no key of a lost round", nodes[i].Name)
			}
			cont(2)
			cont(3)
			cont(4)
		})
	}
}
