package pgresource_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/postgres/pgtest"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads/pgresource"
	"github.com/lockcheck/lockcheck/workloads/resource"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fencedStore starts a database with key k and opens a fenced store on it.
func fencedStore(t *testing.T) (string, *pgresource.Store) {
	addr := pgtest.Start(t)
	require.NoError(t, pgresource.Setup(context.Background(), addr, []string{"k"}))
	store := pgresource.Open(addr, 2*time.Second, true)
	t.Cleanup(func() { store.Close() }) //nolint:errcheck // the test is over
	return addr, store
}

func TestDatabaseFencesStaleWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr, store := fencedStore(t)
	tests := []struct {
		name     string
		fence    *int64
		accepted bool
		reason   string
	}{
		{"first fence", history.Int64(5), true, ""},
		{"lower fence", history.Int64(3), false, "fence 3 is not above fence_token 5"},
		{"same fence", history.Int64(5), false, "WHERE fence_token < 5 matched no row"},
		{"no fence", nil, false, "no fence"},
		{"higher fence", history.Int64(9), true, ""},
	}
	for i, tt := range tests {
		reply, err := store.Write(ctx, resource.WriteRequest{Key: "k", Process: 1, Req: fmt.Sprint(i), Fence: tt.fence, Read: int64(i), Value: int64(i + 1)})
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.accepted, reply.Accepted, tt.name)
		assert.Contains(t, reply.Reason, tt.reason, tt.name)
	}
	path := filepath.Join(t.TempDir(), "resource.jsonl")
	f, err := os.Create(path)
	require.NoError(t, err)
	var handed []int64
	last, err := pgresource.Export(ctx, addr, f, 0, func(e *history.ResourceEntry) { handed = append(handed, e.Seq) })
	require.NoError(t, err)
	require.NoError(t, f.Close())
	log, err := history.ReadResourceLog(path)
	require.NoError(t, err)
	require.Len(t, log, len(tests), "every write, accepted or refused, is in the audit table")
	for i, e := range log {
		assert.Equal(t, tests[i].accepted, e.Accepted, tests[i].name)
		assert.Equal(t, int64(i+1), e.Seq)
	}
	assert.Len(t, handed, len(tests), "each row is handed on as it is written")
	assert.Equal(t, int64(len(tests)), last)

	// A soak's next segment exports only the rows after the last export.
	var rest strings.Builder
	again, err := pgresource.Export(ctx, addr, &rest, 2, nil)
	require.NoError(t, err)
	assert.Equal(t, last, again)
	assert.Equal(t, len(tests)-2, strings.Count(rest.String(), "\n"), "the rows after seq 2")
	rest.Reset()
	again, err = pgresource.Export(ctx, addr, &rest, last, nil)
	require.NoError(t, err)
	assert.Equal(t, last, again, "nothing new: the last seq stays")
	assert.Empty(t, rest.String())
}

// The interleaving lockcheck found under load with the article's
// write-only condition: the next holder (fence 12) reads, the paused one
// (fence 11) wakes and writes, and the next holder's write would overwrite a
// value it never read. A fenced read records its fence, so the paused
// holder's write is refused and the next holder's goes through.
func TestDatabaseRefusesAWriteBelowAFenceAlreadyRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, store := fencedStore(t)

	write := func(fence, read int64) resource.WriteReply {
		reply, err := store.Write(ctx, resource.WriteRequest{Key: "k", Process: 1, Req: fmt.Sprint(fence), Fence: history.Int64(fence), Read: read, Value: read + 1})
		require.NoError(t, err)
		return reply
	}
	require.True(t, write(10, 0).Accepted)
	got, err := store.Read(ctx, resource.ReadRequest{Key: "k", Fence: history.Int64(12)})
	require.NoError(t, err)
	assert.Equal(t, int64(1), got.Value)

	stale := write(11, 1)
	assert.False(t, stale.Accepted, "a fence below one a read has shown cannot write")
	assert.Contains(t, stale.Reason, "below read_fence 12")
	assert.True(t, write(12, got.Value).Accepted, "the reader's own fence writes")
}
