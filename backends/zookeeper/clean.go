package zookeeper

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"
)

// Clean deletes the lock nodes of the keys and their parents, which a run on
// an ensemble lockcheck did not start leaves (backends.Cleaner): a lock
// node is ephemeral, but a paused or killed client's lives until its
// session expires, and a key's parent node is persistent. Root goes too
// once no key of another run is under it.
func (l *Lock) Clean(ctx context.Context, keys []string) error {
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	s, err := l.session(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, key := range keys {
		dir := Root + "/" + key
		children, err := call(ctx, func() ([]string, error) {
			c, _, err := s.conn.Children(dir)
			return c, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, c := range children {
			errs = append(errs, deleteNode(ctx, s, dir+"/"+c))
		}
		errs = append(errs, deleteNode(ctx, s, dir))
	}
	if err := deleteNode(ctx, s, Root); err != nil && !errors.Is(err, zk.ErrNotEmpty) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// deleteNode deletes path, whatever its version; one gone already is fine.
func deleteNode(ctx context.Context, s *session, path string) error {
	_, err := call(ctx, func() (struct{}, error) { return struct{}{}, s.conn.Delete(path, -1) })
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}
