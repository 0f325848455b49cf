package mariadb

import (
	"context"
	"database/sql"
	"errors"
)

// Clean kills every session still holding a GET_LOCK lock of the keys,
// which a run on a server lockcheck did not start may leave
// (backends.Cleaner): such a lock is no row, it lives as long as its
// session, and the session of a client that vanished lasts until the
// server notices (wait_timeout).
func (l *Lock) Clean(ctx context.Context, keys []string) error {
	db, err := open(l.opts.Addr, l.opts.Timeout, l.opts.Source)
	if err != nil {
		return err
	}
	defer db.Close()
	var errs []error
	for _, key := range keys {
		var id sql.NullInt64
		if err := db.QueryRowContext(ctx, `SELECT IS_USED_LOCK(?)`, key).Scan(&id); err != nil {
			errs = append(errs, err)
			continue
		}
		if id.Valid {
			_, err := kill(ctx, db, id.Int64)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
