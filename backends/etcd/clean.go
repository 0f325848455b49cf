package etcd

import (
	"context"
	"errors"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Clean deletes every mutex entry of the lock keys, which a run on a cluster
// lockcheck did not start leaves (backends.Cleaner): each entry is bound to
// its session's lease and would go with it, but a paused or killed client's
// lease lives until it expires.
func (l *Lock) Clean(ctx context.Context, keys []string) error {
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	var errs []error
	for _, key := range keys {
		if _, err := l.cli.Delete(ctx, KeyPrefix+key+"/", clientv3.WithPrefix()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
