package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// Clean ends every session still holding an advisory lock of the keys, which
// a run on a server lockcheck did not start may leave (backends.Cleaner): an
// advisory lock is no row, it lives as long as its session, and the session
// of a client that vanished lasts until the server notices. The fence
// sequence stays: fences must keep rising across runs.
func (l *Lock) Clean(ctx context.Context, keys []string) error {
	conn, err := ConnectPrimary(ctx, l.opts.Addrs, l.opts.Timeout, l.opts.Source)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var errs []error
	for _, key := range keys {
		classid, objid := split(KeyID(key))
		_, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 1 AND pid <> pg_backend_pid()`, pgx.QueryExecModeSimpleProtocol, classid, objid)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
