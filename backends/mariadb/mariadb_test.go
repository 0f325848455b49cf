package mariadb_test

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/mariadb"
	"github.com/lockcheck/lockcheck/backends/nodetest"
)

func TestMain(m *testing.M) {
	if mariadb.RunNodeFromEnv() {
		return
	}
	os.Exit(m.Run())
}

// start starts a real MariaDB node and returns its address and service.
func start(t *testing.T) (string, *mariadb.Service) {
	t.Helper()
	server, err := mariadb.Server.Find(mariadb.Server.Name)
	if err != nil {
		t.Fatalf("MariaDB is not installed (run scripts/setup): %v", err)
	}
	self, err := os.Executable()
	require.NoError(t, err)
	addr := nodetest.Start(t, mariadb.Node(mariadb.NodeName, self, server), nil)
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	return addr, mariadb.NewService([]backends.Endpoint{{Name: mariadb.NodeName, Ports: []int{p}}})
}

func open(t *testing.T, addr string, wait time.Duration) *mariadb.Lock {
	t.Helper()
	l, err := mariadb.New(mariadb.Options{Client: backends.Client{Timeout: 2 * time.Second}, Addr: addr, WaitTimeout: wait})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

func TestGetLockOnALiveServer(t *testing.T) {
	t.Parallel()
	addr, svc := start(t)
	ctx := context.Background()

	t.Run("exclusive, released once, on the session of its grant", func(t *testing.T) {
		a, b := open(t, addr, 5*time.Second), open(t, addr, 5*time.Second)
		ga, err := a.Acquire(ctx, "k1")
		require.NoError(t, err)
		assert.Regexp(t, `^mariadb-0/\d+$`, ga.Session)
		assert.Equal(t, 5*time.Second, ga.TTL, "wait_timeout is the lease")
		assert.Nil(t, ga.Fence, "GET_LOCK hands out no fence")
		_, err = b.Acquire(ctx, "k1")
		assert.ErrorIs(t, err, backends.ErrNotAcquired)
		ok, err := a.Extend(ctx, "k1", ga)
		require.NoError(t, err)
		assert.True(t, ok)
		_, holder, err := b.InspectHolder(ctx, "k1")
		require.NoError(t, err)
		assert.Equal(t, ga.Session, holder)
		released, on, err := a.ReleaseOn(ctx, "k1", ga)
		require.NoError(t, err)
		assert.True(t, released)
		assert.Equal(t, ga.Session, on)
		released, err = a.Release(ctx, "k1", ga)
		require.NoError(t, err)
		assert.False(t, released, "RELEASE_LOCK of a lock not held")
		desc, holder, err := b.InspectHolder(ctx, "k1")
		require.NoError(t, err)
		assert.Empty(t, holder)
		assert.Contains(t, desc, "free")
	})

	t.Run("KILL CONNECTION frees the lock; its client learns at its next statement", func(t *testing.T) {
		a, b := open(t, addr, 5*time.Second), open(t, addr, 5*time.Second)
		ga, err := a.Acquire(ctx, "k2")
		require.NoError(t, err)
		landed, err := svc.TerminateSession(ctx, ga.Session)
		require.NoError(t, err)
		assert.True(t, landed)
		var gb backends.Grant
		require.Eventually(t, func() bool {
			gb, err = b.Acquire(ctx, "k2")
			return err == nil
		}, 5*time.Second, 10*time.Millisecond, "the lock stayed held after its session was killed: %v", err)
		_, err = a.Release(ctx, "k2", ga)
		assert.Error(t, err, "the killed client learns only now")
		landed, err = svc.TerminateSession(ctx, ga.Session)
		require.NoError(t, err)
		assert.False(t, landed, "a session already gone is no kill")
		_, err = b.Release(ctx, "k2", gb)
		require.NoError(t, err)
	})

	t.Run("a holder idle past wait_timeout loses the lock while it goes on believing", func(t *testing.T) {
		a, b := open(t, addr, time.Second), open(t, addr, time.Second)
		ga, err := a.Acquire(ctx, "k3")
		require.NoError(t, err)
		var gb backends.Grant
		require.Eventually(t, func() bool {
			gb, err = b.Acquire(ctx, "k3")
			return err == nil
		}, 10*time.Second, 50*time.Millisecond, "the idle holder's lock was never freed: %v", err)
		_, err = a.Release(ctx, "k3", ga)
		assert.Error(t, err, "the server closed the idle holder's session")
		_, err = b.Release(ctx, "k3", gb)
		require.NoError(t, err)
	})

	t.Run("clean kills the sessions a run left holding its keys", func(t *testing.T) {
		a, b := open(t, addr, 5*time.Second), open(t, addr, 5*time.Second)
		_, err := a.Acquire(ctx, "k4")
		require.NoError(t, err)
		require.NoError(t, b.Clean(ctx, []string{"k4"}))
		require.Eventually(t, func() bool {
			_, holder, err := b.InspectHolder(ctx, "k4")
			return err == nil && holder == ""
		}, 5*time.Second, 20*time.Millisecond)
	})
}

func TestWaitTimeoutIsWholeSeconds(t *testing.T) {
	for _, tt := range []struct{ asked, ttl, want time.Duration }{
		{0, 500 * time.Millisecond, time.Second},
		{0, 1500 * time.Millisecond, 2 * time.Second},
		{3 * time.Second, 500 * time.Millisecond, 3 * time.Second},
		{0, 0, time.Second},
	} {
		assert.Equal(t, tt.want, mariadb.WaitTimeout(tt.asked, tt.ttl), "asked %s, ttl %s", tt.asked, tt.ttl)
	}
}
