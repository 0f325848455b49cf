package pgresource_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

func TestDatabaseFencesStaleWrites(t *testing.T) {
	t.Parallel()
	addr := pgtest.Start(t)
	ctx := context.Background()
	require.NoError(t, pgresource.Setup(ctx, addr, []string{"k"}))
	store := pgresource.Open(addr, 2*time.Second, true)
	defer store.Close()
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
	require.NoError(t, pgresource.Export(ctx, addr, f))
	require.NoError(t, f.Close())
	log, err := history.ReadResourceLog(path)
	require.NoError(t, err)
	require.Len(t, log, len(tests), "every write, accepted or refused, is in the audit table")
	for i, e := range log {
		assert.Equal(t, tests[i].accepted, e.Accepted, tests[i].name)
		assert.Equal(t, int64(i+1), e.Seq)
	}
}
