package redlock

import (
	"context"
	"errors"

	goredis "github.com/redis/go-redis/v9"
)

// Clean deletes the lock keys and their fence counters on every node, which
// a run on masters lockcheck did not start leaves (backends.Cleaner).
func (l *Lock) Clean(ctx context.Context, keys []string) error {
	return CleanNodes(ctx, l.cluster, keys)
}

// CleanNodes deletes keys and their fence counters on every node of c; a
// node that does not answer is an error, since it may keep them.
func CleanNodes(ctx context.Context, c *Cluster, keys []string) error {
	all := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		all = append(all, k, FenceKey(k))
	}
	replies := each(ctx, c, func(ctx context.Context, rdb *goredis.Client) (int64, error) {
		return rdb.Del(ctx, all...).Result()
	})
	var errs []error
	for i, r := range replies {
		if r.err != nil {
			errs = append(errs, errors.New(c.nodes[i].Name+": "+r.err.Error()))
		}
	}
	return errors.Join(errs...)
}
