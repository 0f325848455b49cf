package postgres_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/postgres"
	"github.com/lockcheck/lockcheck/backends/postgres/pgtest"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads/pgresource"
	"github.com/lockcheck/lockcheck/workloads/resource"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func open(t *testing.T, addr, variant string) *postgres.Lock {
	t.Helper()
	l, err := postgres.New(postgres.Options{Client: backends.Client{Fence: true, Timeout: 2 * time.Second}, Addrs: []string{addr}, Variant: variant})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

func TestAdvisoryLocksOnALiveServer(t *testing.T) {
	t.Parallel()
	addr := pgtest.Start(t)
	ctx := context.Background()
	svc := postgres.NewService([]backends.Endpoint{{Name: postgres.Primary, Ports: []int{port(t, addr)}}})

	t.Run("session lock: exclusive, released once, fences rise", func(t *testing.T) {
		a, b := open(t, addr, postgres.Session), open(t, addr, postgres.Session)
		ga, err := a.Acquire(ctx, "k1")
		require.NoError(t, err)
		assert.NotEmpty(t, ga.Session)
		assert.Zero(t, ga.TTL, "a session lock has no TTL")
		_, err = b.Acquire(ctx, "k1")
		assert.ErrorIs(t, err, backends.ErrNotAcquired)
		released, err := a.Release(ctx, "k1", ga)
		require.NoError(t, err)
		assert.True(t, released)
		released, err = a.Release(ctx, "k1", ga)
		require.NoError(t, err)
		assert.False(t, released, "pg_advisory_unlock of a lock not held returns false")
		gb, err := b.Acquire(ctx, "k1")
		require.NoError(t, err)
		assert.Greater(t, *gb.Fence, *ga.Fence)
		_, err = b.Release(ctx, "k1", gb)
		require.NoError(t, err)
	})

	t.Run("a terminated session frees its lock; its client learns at its next statement", func(t *testing.T) {
		a, b := open(t, addr, postgres.Session), open(t, addr, postgres.Session)
		ga, err := a.Acquire(ctx, "k2")
		require.NoError(t, err)
		landed, err := svc.TerminateSession(ctx, ga.Session)
		require.NoError(t, err)
		assert.True(t, landed)
		var gb backends.Grant
		require.Eventually(t, func() bool {
			gb, err = b.Acquire(ctx, "k2")
			return err == nil
		}, 5*time.Second, 10*time.Millisecond, "the lock stayed held after its session was terminated: %v", err)
		_, err = a.Release(ctx, "k2", ga)
		assert.Error(t, err, "the killed client learns only now")
		landed, err = svc.TerminateSession(ctx, ga.Session)
		require.NoError(t, err)
		assert.False(t, landed, "a session already gone is no kill")
		inspect, holder, err := b.InspectHolder(ctx, "k2")
		require.NoError(t, err)
		assert.Contains(t, inspect, "held by server session "+gb.Session)
		assert.Equal(t, gb.Session, holder, "the session of the grant holds it")
		released, on, err := b.ReleaseOn(ctx, "k2", gb)
		require.NoError(t, err)
		assert.True(t, released)
		assert.Equal(t, gb.Session, on, "straight to the server, a release runs on its grant's session")
		_, holder, err = b.InspectHolder(ctx, "k2")
		require.NoError(t, err)
		assert.Empty(t, holder)
	})

	t.Run("xact lock: the write commits with the lock or not at all", func(t *testing.T) {
		require.NoError(t, pgresource.Setup(ctx, addr, []string{"k3"}))
		write := func(l *postgres.Lock, process int, value int64) (resource.WriteReply, error) {
			store := pgresource.Open(addr, 2*time.Second, false)
			defer store.Close()
			store.InLockTx(l)
			return store.Write(ctx, resource.WriteRequest{Key: "k3", Process: history.Process(process), Req: fmt.Sprint(process), Value: value})
		}
		a, b := open(t, addr, postgres.Xact), open(t, addr, postgres.Xact)
		ga, err := a.Acquire(ctx, "k3")
		require.NoError(t, err)
		reply, err := write(a, 1, 100)
		require.NoError(t, err)
		assert.True(t, reply.Accepted)
		landed, err := svc.TerminateSession(ctx, ga.Session)
		require.NoError(t, err)
		require.True(t, landed)
		_, err = a.Release(ctx, "k3", ga)
		assert.Error(t, err, "the commit of a terminated session fails")

		// The terminated backend says so before it exits and lets its
		// locks go.
		var gb backends.Grant
		require.Eventually(t, func() bool {
			gb, err = b.Acquire(ctx, "k3")
			return err == nil
		}, 5*time.Second, 10*time.Millisecond, "the lock stayed held after its session was terminated: %v", err)
		reply, err = write(b, 2, 1)
		require.NoError(t, err)
		assert.Equal(t, int64(0), reply.Prev, "the killed client's write never committed")
		ok, err := b.Release(ctx, "k3", gb)
		require.NoError(t, err)
		assert.True(t, ok)
	})
}

func port(t *testing.T, addr string) int {
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	var n int
	_, err = fmt.Sscan(p, &n)
	require.NoError(t, err)
	return n
}
