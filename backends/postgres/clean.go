package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// cleanRounds bounds how often Clean frees a key and reads pg_locks again,
// cleanWait how long it waits between rounds for terminated sessions to
// exit.
const (
	cleanRounds = 20
	cleanWait   = 100 * time.Millisecond
)

// Clean ends every session still holding an advisory lock of the keys, which
// a run on a server lockcheck did not start may leave (backends.Cleaner): an
// advisory lock is no row, it lives as long as its session, and the session
// of a client that vanished lasts until the server notices. The fence
// sequence stays: fences must keep rising across runs. A key still locked
// when it gives up is an error naming the sessions that hold it.
func (l *Lock) Clean(ctx context.Context, keys []string) error {
	conn, err := ConnectPrimary(ctx, l.opts.Addrs, l.opts.Timeout, l.opts.Source)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var errs []error
	for _, key := range keys {
		errs = append(errs, cleanKey(ctx, conn, key))
	}
	return errors.Join(errs...)
}

// cleanKey frees key's advisory lock whichever server session holds it.
// Through a pooler in transaction mode each statement may land on another
// server connection, and often on the very one that holds the lock, where
// "every session but mine" ends nothing: so each round first unlocks it on
// the session the statement lands on (as often as that session holds it),
// then ends every other session holding it, then reads pg_locks again,
// until none holds it or cleanRounds pass.
func cleanKey(ctx context.Context, conn *pgx.Conn, key string) error {
	id := KeyID(key)
	classid, objid := split(id)
	simple := pgx.QueryExecModeSimpleProtocol
	var holders []int32
	for round := 0; round < cleanRounds; round++ {
		for range cleanRounds {
			var freed bool
			if err := conn.QueryRow(ctx, `SELECT pg_advisory_unlock($1)`, simple, id).Scan(&freed); err != nil {
				return fmt.Errorf("free lock %s: %w", key, err)
			}
			if !freed {
				break
			}
		}
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 1 AND pid <> pg_backend_pid()`, simple, classid, objid); err != nil {
			return fmt.Errorf("end the sessions holding lock %s: %w", key, err)
		}
		rows, err := conn.Query(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 1`, simple, classid, objid)
		if err != nil {
			return fmt.Errorf("read pg_locks for lock %s: %w", key, err)
		}
		if holders, err = pgx.CollectRows(rows, pgx.RowTo[int32]); err != nil {
			return fmt.Errorf("read pg_locks for lock %s: %w", key, err)
		}
		if len(holders) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("advisory lock %s is still held by server session pid %v: %w; end it with pg_terminate_backend", key, holders, ctx.Err())
		case <-time.After(cleanWait):
		}
	}
	return fmt.Errorf("advisory lock %s is still held by server session pid %v after %d rounds of cleanup; end it with pg_terminate_backend", key, holders, cleanRounds)
}
