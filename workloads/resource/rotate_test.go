package resource

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/history"
)

// Rotating the log (a soak's segment boundary) closes the old log with
// every write before it, logs every later write to the new one, keeps the
// store's state (a stale fence is still refused), and returns each key's
// value and highest written fence.
func TestRotateMovesTheLogAndKeepsTheState(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "1.jsonl"), filepath.Join(dir, "2.jsonl")
	srv, err := Start(first, true)
	require.NoError(t, err)
	defer srv.Close()
	c := NewClient(srv.Addr(), time.Second)
	ctx := context.Background()
	reply, err := c.Write(ctx, WriteRequest{Key: "k", Req: "a", Fence: history.Int64(5), Read: 0, Value: 1})
	require.NoError(t, err)
	require.True(t, reply.Accepted)

	f, err := os.OpenFile(second, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	assert.Equal(t, []history.KeyHead{{Key: "k", Value: history.Int64(1), WrittenFence: history.Int64(5)}}, srv.Heads())
	require.NoError(t, srv.Rotate(f))

	reply, err = c.Write(ctx, WriteRequest{Key: "k", Req: "b", Fence: history.Int64(4), Read: 1, Value: 2})
	require.NoError(t, err)
	assert.False(t, reply.Accepted, "the fence written before the rotation still counts")
	reply, err = c.Write(ctx, WriteRequest{Key: "k", Req: "c", Fence: history.Int64(6), Read: 1, Value: 2})
	require.NoError(t, err)
	assert.True(t, reply.Accepted)
	assert.Equal(t, int64(1), reply.Prev)
	require.NoError(t, srv.Close())

	before, err := history.ReadResourceLog(first)
	require.NoError(t, err)
	after, err := history.ReadResourceLog(second)
	require.NoError(t, err)
	require.Len(t, before, 1)
	require.Len(t, after, 2)
	assert.Equal(t, "a", before[0].Req)
	assert.Equal(t, []string{"b", "c"}, []string{after[0].Req, after[1].Req})
}
