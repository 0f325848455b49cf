package resource

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The resource's fence sequence, over HTTP: every number handed out for a
// key is above all before it, also to clients asking at once, and each key
// counts on its own.
func TestNextFenceIsStrictlyIncreasing(t *testing.T) {
	srv, err := Start(filepath.Join(t.TempDir(), "resource.jsonl"), true)
	require.NoError(t, err)
	defer srv.Close()
	ctx := context.Background()

	const clients, each = 8, 25
	got := make([][]int64, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := NewClient(srv.Addr(), time.Second)
			for range each {
				r, err := c.NextFence(ctx, FenceRequest{Key: "lock-0"})
				if !assert.NoError(t, err) {
					return
				}
				got[i] = append(got[i], r.Fence)
			}
		}()
	}
	wg.Wait()
	var all []int64
	for _, g := range got {
		assert.True(t, slices.IsSorted(g), "one client sees its fences rise")
		all = append(all, g...)
	}
	slices.Sort(all)
	want := make([]int64, clients*each)
	for i := range want {
		want[i] = int64(i + 1)
	}
	assert.Equal(t, want, all, "no number is handed out twice and none is skipped")

	r, err := NewClient(srv.Addr(), time.Second).NextFence(ctx, FenceRequest{Key: "lock-1"})
	require.NoError(t, err)
	assert.Equal(t, int64(1), r.Fence, "another key has its own sequence")
}
