package redis_test

import (
	"context"
	"net"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/nodetest"
	"github.com/lockcheck/lockcheck/backends/redis"
)

func open(t *testing.T, addr, variant string, fp backends.Failpoint) *redis.Lock {
	t.Helper()
	l, err := redis.New(redis.Options{Addr: addr, Variant: variant,
		Client: backends.Client{TTL: 2 * time.Second, Fence: true, Timeout: time.Second, Failpoint: fp}})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// Each variant on a live redis-server: one client holds the lock and the
// next is refused; what a late release of the refused client does, and
// what the key looks like, tell the variants apart.
func TestVariantsOnALiveServer(t *testing.T) {
	addr, _ := nodetest.Redis(t)
	tests := []struct {
		variant string
		// lateReleaseDeletes: a release with another client's token deletes
		// the holder's key (del-release's bug).
		lateReleaseDeletes bool
	}{
		{redis.Correct, false},
		{redis.SetnxExpire, false},
		{redis.DelRelease, true},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.variant, func(t *testing.T) {
			key := "lock-" + tt.variant
			holder, next := open(t, addr, tt.variant, nil), open(t, addr, tt.variant, nil)
			g, err := holder.Acquire(ctx, key)
			require.NoError(t, err)
			require.NotNil(t, g.Fence)
			assert.Equal(t, 2*time.Second, g.TTL, "the lease granted is the PX asked")
			state, err := holder.Inspect(ctx, key)
			require.NoError(t, err)
			assert.Regexp(t, `^`+key+` is held with \d+ ms left$`, state)

			_, err = next.Acquire(ctx, key)
			assert.ErrorIs(t, err, backends.ErrNotAcquired)
			assert.NotErrorIs(t, err, backends.ErrRefused, "a busy lock is no refusal of the service")

			deleted, err := next.Release(ctx, key, backends.Grant{Token: "not-the-holders"})
			require.NoError(t, err)
			assert.Equal(t, tt.lateReleaseDeletes, deleted)
			if !tt.lateReleaseDeletes {
				deleted, err = holder.Release(ctx, key, g)
				require.NoError(t, err)
				assert.True(t, deleted)
			}
			state, err = holder.Inspect(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, key+" is free", state)

			again, err := next.Acquire(ctx, key)
			require.NoError(t, err)
			assert.Greater(t, *again.Fence, *g.Fence, "INCR fences rise with every grant")
		})
	}
}

// setnx-expire: a client that dies between SETNX and EXPIRE (here: its
// EXPIRE never gets out) leaves a key with no TTL, held forever.
func TestSetnxExpireGapLeavesAKeyWithNoTTL(t *testing.T) {
	addr, _ := nodetest.Redis(t)
	ctx, cancel := context.WithCancel(context.Background())
	var hit []string
	l := open(t, addr, redis.SetnxExpire, func(name string) { hit = append(hit, name); cancel() })
	_, err := l.Acquire(ctx, "lock-0")
	require.Error(t, err, "the EXPIRE after the gap was cancelled")
	assert.Equal(t, []string{redis.FailpointSetnxExpireGap}, hit)
	state, err := l.Inspect(context.Background(), "lock-0")
	require.NoError(t, err)
	assert.Equal(t, "lock-0 is held with no TTL (PTTL -1): it will never expire", state)
}

func TestExtendNeedsTheHoldersToken(t *testing.T) {
	addr, _ := nodetest.Redis(t)
	ctx := context.Background()
	l := open(t, addr, redis.Correct, nil)
	g, err := l.Acquire(ctx, "lock-0")
	require.NoError(t, err)
	ok, err := l.Extend(ctx, "lock-0", backends.Grant{Token: "another"})
	require.NoError(t, err)
	assert.False(t, ok, "a client whose lease ended cannot extend the next holder's")
	ok, err = l.Extend(ctx, "lock-0", g)
	require.NoError(t, err)
	assert.True(t, ok)
}

// No connection at all means the SET was never sent: a refusal, certain.
func TestNoServerIsARefusal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	l := open(t, addr, redis.Correct, nil)
	_, err = l.Acquire(context.Background(), "lock-0")
	assert.ErrorIs(t, err, backends.ErrRefused)
	assert.ErrorIs(t, err, backends.ErrNotAcquired)
}

func TestUnknownVariantIsRefused(t *testing.T) {
	_, err := redis.New(redis.Options{Addr: "127.0.0.1:1", Variant: "setex"})
	assert.EqualError(t, err, `unknown redis variant "setex" (want one of [correct setnx-expire del-release])`)
}

// Clean deletes the run's keys and fence counters, and nothing else.
func TestCleanDeletesTheRunsKeysOnly(t *testing.T) {
	addr, _ := nodetest.Redis(t)
	ctx := context.Background()
	l := open(t, addr, redis.Correct, nil)
	_, err := l.Acquire(ctx, "run:lock-0")
	require.NoError(t, err)
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()
	require.NoError(t, rdb.Set(ctx, "someone-elses", "v", 0).Err())
	require.NoError(t, l.Clean(ctx, []string{"run:lock-0"}))
	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"someone-elses"}, keys)
}

func TestNodeIsReadyAndNamesItsVersion(t *testing.T) {
	addr, _ := nodetest.Redis(t)
	spec := redis.Node("redis-0", "")
	assert.Equal(t, "redis-server", spec.Program)
	ctx := context.Background()
	require.NoError(t, spec.Ready(ctx, addr))
	v, err := spec.Version(ctx, addr)
	require.NoError(t, err)
	assert.Regexp(t, `^\d+\.\d+\.\d+$`, v)
}
