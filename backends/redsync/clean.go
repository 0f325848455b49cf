package redsync

import (
	"context"

	"github.com/lockcheck/lockcheck/backends/redlock"
)

// Clean deletes the mutexes (named by their keys) and the fence counters on
// every node, which a run on masters lockcheck did not start leaves
// (backends.Cleaner).
func (l *Lock) Clean(ctx context.Context, keys []string) error {
	return redlock.CleanNodes(ctx, l.cluster, keys)
}
