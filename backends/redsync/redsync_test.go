package redsync_test

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

func TestNewRefusesWhatRedsyncCannotRun(t *testing.T) {
	_, err := redsync.New(redlock.Options{Client: backends.Client{TTL: time.Second}})
	assert.EqualError(t, err, "redsync needs at least one node")
	_, err = redsync.New(redlock.Options{Nodes: []redlock.Node{{Name: "redlock-1", Addr: "127.0.0.1:1"}}})
	assert.EqualError(t, err, "redsync needs a positive TTL")
}

// What redsync's answers mean on three live masters: a release or extend
// with another's token is a definite "not yours" (false, no error), not an
// unknown outcome; only nodes that do not answer make one.
func TestRedsyncOutcomesOnLiveMasters(t *testing.T) {
	var nodes []redlock.Node
	var cmds []*exec.Cmd
	for i := range 3 {
		addr, cmd := nodetest.Redis(t)
		nodes = append(nodes, redlock.Node{Name: redlock.NodeName(i), Addr: addr})
		cmds = append(cmds, cmd)
	}
	l, err := redsync.New(redlock.Options{Client: backends.Client{TTL: 20 * time.Second, Fence: true}, Nodes: nodes, NodeTimeout: 100 * time.Millisecond})
	require.NoError(t, err)
	defer l.Close()
	ctx := context.Background()

	g, err := l.Acquire(ctx, "lock-0")
	require.NoError(t, err)
	assert.Empty(t, g.Nodes, "redsync does not say which nodes granted the lock")
	require.NotNil(t, g.Fence)
	assert.False(t, g.Deadline.IsZero(), "the grant carries redsync's validity deadline")

	ok, err := l.Release(ctx, "lock-0", backends.Grant{Token: "another"})
	require.NoError(t, err, "every node answered: not yours")
	assert.False(t, ok)
	ok, err = l.Extend(ctx, "lock-0", backends.Grant{Token: "another"})
	require.NoError(t, err)
	assert.False(t, ok)
	ok, err = l.Extend(ctx, "lock-0", g)
	require.NoError(t, err)
	assert.True(t, ok)

	for _, c := range cmds {
		require.NoError(t, c.Process.Signal(syscall.SIGSTOP))
	}
	_, err = l.Release(ctx, "lock-0", g)
	assert.Error(t, err, "no node answered: the release's outcome is unknown")
	for _, c := range cmds {
		require.NoError(t, c.Process.Signal(syscall.SIGCONT))
	}
	// Unknown, not failed: the stopped nodes held the DEL in their sockets
	// and applied it once continued, so the lock is free again.
	assert.Eventually(t, func() bool {
		_, err := l.Acquire(ctx, "lock-0")
		return err == nil
	}, 5*time.Second, 20*time.Millisecond, "the release sent to stopped nodes took effect once they ran (the 20 s lease had not run out)")
}

// Clean deletes the run's mutexes and fence counters on every node.
func TestCleanEveryNode(t *testing.T) {
	var nodes []redlock.Node
	for i := range 3 {
		addr, _ := nodetest.Redis(t)
		nodes = append(nodes, redlock.Node{Name: redlock.NodeName(i), Addr: addr})
	}
	l, err := redsync.New(redlock.Options{Client: backends.Client{TTL: 10 * time.Second, Fence: true}, Nodes: nodes})
	require.NoError(t, err)
	defer l.Close()
	ctx := context.Background()
	_, err = l.Acquire(ctx, "run:lock-0")
	require.NoError(t, err)
	require.NoError(t, l.Clean(ctx, []string{"run:lock-0"}))
	for _, n := range nodes {
		rdb := goredis.NewClient(&goredis.Options{Addr: n.Addr})
		keys, err := rdb.Keys(ctx, "*").Result()
		rdb.Close()
		require.NoError(t, err)
		assert.Empty(t, keys, "%s keeps nothing of the run", n.Name)
	}
}
