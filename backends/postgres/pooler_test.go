package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/postgres"
	"github.com/lockcheck/lockcheck/backends/postgres/pgtest"
)

func openVia(t *testing.T, addr string, mode pgx.QueryExecMode) *postgres.Lock {
	t.Helper()
	l, err := postgres.New(postgres.Options{Client: backends.Client{Timeout: 2 * time.Second}, Addrs: []string{addr}, ExecMode: mode})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// leftOnServer takes key through pooler with a client that then goes, its
// lock left on the server connection, and returns a client of primary
// that saw it there.
func leftOnServer(t *testing.T, pooler, primary, key string) *postgres.Lock {
	t.Helper()
	ctx := context.Background()
	a := openVia(t, pooler, pgx.QueryExecModeSimpleProtocol)
	ga, err := a.Acquire(ctx, key)
	require.NoError(t, err)
	require.NoError(t, a.Close(), "the client goes; its lock stays on the server connection")
	direct := openVia(t, primary, 0)
	_, holder, err := direct.InspectHolder(ctx, key)
	require.NoError(t, err)
	require.Equal(t, ga.Session, holder)
	return direct
}

// An advisory lock taken through a real PgBouncer: what an application
// with pgx gets in each pool mode. The pools have one server connection,
// so that which session a statement lands on is certain.
func TestAdvisoryLocksThroughPgBouncer(t *testing.T) {
	t.Parallel()
	primary := pgtest.Start(t)
	ctx := context.Background()

	t.Run("transaction pooling, simple protocol: the second client is granted the lock the first holds, on its session", func(t *testing.T) {
		t.Parallel()
		pooler := pgtest.StartPooler(t, primary, postgres.Pool{Mode: postgres.PoolTransaction, Size: 1})
		a, b := openVia(t, pooler, pgx.QueryExecModeSimpleProtocol), openVia(t, pooler, pgx.QueryExecModeSimpleProtocol)
		ga, err := a.Acquire(ctx, "t1")
		require.NoError(t, err)
		gb, err := b.Acquire(ctx, "t1")
		require.NoError(t, err, "advisory locks are re-entrant per session, and the pooler handed b a's session")
		assert.Equal(t, ga.Session, gb.Session)
		_, holder, err := a.InspectHolder(ctx, "t1")
		require.NoError(t, err)
		assert.Equal(t, ga.Session, holder)
		for _, l := range []*postgres.Lock{a, b} {
			released, on, err := l.ReleaseOn(ctx, "t1", ga)
			require.NoError(t, err)
			assert.True(t, released)
			assert.Equal(t, ga.Session, on)
		}
	})

	t.Run("transaction pooling, pgx's statement cache: the next client's prepare finds the statement there (42P05)", func(t *testing.T) {
		t.Parallel()
		pooler := pgtest.StartPooler(t, primary, postgres.Pool{Mode: postgres.PoolTransaction, Size: 1})
		a, b := openVia(t, pooler, 0), openVia(t, pooler, 0)
		ga, err := a.Acquire(ctx, "t2")
		require.NoError(t, err)
		_, err = b.Acquire(ctx, "t2")
		require.Error(t, err)
		assert.NotErrorIs(t, err, backends.ErrNotAcquired, "not a refusal: the statement never ran")
		assert.Contains(t, err.Error(), "42P05")
		_, err = a.Release(ctx, "t2", ga)
		require.NoError(t, err)
	})

	t.Run("session pooling: the lock is the client's alone, released where it was granted", func(t *testing.T) {
		t.Parallel()
		pooler := pgtest.StartPooler(t, primary, postgres.Pool{Mode: postgres.PoolSession, Size: 2})
		a, b := openVia(t, pooler, 0), openVia(t, pooler, 0)
		ga, err := a.Acquire(ctx, "t3")
		require.NoError(t, err)
		_, err = b.Acquire(ctx, "t3")
		assert.ErrorIs(t, err, backends.ErrNotAcquired)
		released, on, err := a.ReleaseOn(ctx, "t3", ga)
		require.NoError(t, err)
		assert.True(t, released)
		assert.Equal(t, ga.Session, on)
	})

	t.Run("session pooling: a holder idle past the pooler's idle timeouts keeps its lock", func(t *testing.T) {
		t.Parallel()
		pooler := pgtest.StartPooler(t, primary, postgres.Pool{Mode: postgres.PoolSession, Size: 2, IdleTimeout: 200 * time.Millisecond})
		a, b := openVia(t, pooler, 0), openVia(t, pooler, 0)
		ga, err := a.Acquire(ctx, "t4")
		require.NoError(t, err)
		time.Sleep(time.Second) // PgBouncer closes no client linked to a server
		_, err = b.Acquire(ctx, "t4")
		assert.ErrorIs(t, err, backends.ErrNotAcquired)
		released, err := a.Release(ctx, "t4", ga)
		require.NoError(t, err)
		assert.True(t, released)
	})

	t.Run("transaction pooling: Clean frees a lock left on the very server connection it is handed", func(t *testing.T) {
		t.Parallel()
		pooler := pgtest.StartPooler(t, primary, postgres.Pool{Mode: postgres.PoolTransaction, Size: 1})
		direct := leftOnServer(t, pooler, primary, "t6")
		cleaner := openVia(t, pooler, pgx.QueryExecModeSimpleProtocol)
		require.NoError(t, cleaner.Clean(ctx, []string{"t6"}), "the pool's one connection is the holder: ending every session but its own ends nothing")
		_, holder, err := direct.InspectHolder(ctx, "t6")
		require.NoError(t, err)
		assert.Empty(t, holder, "no advisory lock of the key is left in pg_locks")
	})

	t.Run("transaction pooling: a lock left on an idle server connection is freed by server_idle_timeout", func(t *testing.T) {
		t.Parallel()
		pooler := pgtest.StartPooler(t, primary, postgres.Pool{Mode: postgres.PoolTransaction, Size: 1, IdleTimeout: 300 * time.Millisecond})
		direct := leftOnServer(t, pooler, primary, "t5")
		var holder string
		var err error
		require.Eventually(t, func() bool {
			_, holder, err = direct.InspectHolder(ctx, "t5")
			return err == nil && holder == ""
		}, 15*time.Second, 100*time.Millisecond, "the idle server connection kept the lock (%s)", holder)
	})
}
