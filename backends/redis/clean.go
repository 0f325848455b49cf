package redis

import "context"

// Clean deletes the lock keys and their fence counters, which a run on a
// service lockcheck did not start leaves (backends.Cleaner). A Sentinel
// client is this Lock too: it deletes them on the master.
func (l *Lock) Clean(ctx context.Context, keys []string) error {
	all := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		all = append(all, k, FenceKey(k))
	}
	return l.rdb.Del(ctx, all...).Err()
}
