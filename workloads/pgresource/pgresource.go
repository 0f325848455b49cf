// Package pgresource is the protected resource kept by a real PostgreSQL
// database (--resource postgres): one row per key holding the counter and
// the highest fence written and read, fenced by the database's own
// conditional UPDATE ... WHERE fence_token < $t AND read_fence <= $t, and an
// audit table each write appends
// to in its own transaction. The audit table, in the order of its bigserial
// (a key's writes hold its row lock while they append, so that order is
// their commit order), is the ground truth; Export writes it out as
// resource.jsonl, so every check reads it as it reads the in-memory
// resource's log.
package pgresource

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lockcheck/lockcheck/backends/postgres"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads/resource"
)

// Name is the resource's name in --resource and results.
const Name = "postgres"

// The schema. fence_token (the highest fence written) and read_fence (the
// highest fence a fenced read has shown) start at 0, below every fence a
// lock or the sequence hands out.
//
// The first article fences with fence_token < $t alone, which is enough for
// its blind write (the supplier's figure). The counter is a
// read-modify-write, and for it that is not enough: a paused holder's write
// can land between the next holder's read and its write, and the next
// holder then overwrites a value it never read (a lost update lockcheck
// found under load). So a fenced read records its fence, and a write with a
// fence below one a read has shown is refused, the rule of the in-memory
// resource.
const schema = `
CREATE TABLE IF NOT EXISTS lockcheck_counter (
	key         text PRIMARY KEY,
	value       bigint NOT NULL DEFAULT 0,
	fence_token bigint NOT NULL DEFAULT 0,
	read_fence  bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS lockcheck_audit (
	seq      bigserial PRIMARY KEY,
	at       bigint  NOT NULL,
	key      text    NOT NULL,
	process  integer NOT NULL,
	req      text    NOT NULL,
	fence    bigint,
	read     bigint  NOT NULL,
	value    bigint  NOT NULL,
	prev     bigint  NOT NULL,
	accepted boolean NOT NULL,
	reason   text    NOT NULL DEFAULT ''
);
CREATE SEQUENCE IF NOT EXISTS lockcheck_fence;
`

// Setup creates the tables and one row per key on the node at addr.
func Setup(ctx context.Context, addr string, keys []string) error {
	conn, err := postgres.Connect(ctx, addr, 5*time.Second)
	if err != nil {
		return fmt.Errorf("resource postgres at %s: %w", addr, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, schema); err != nil {
		return fmt.Errorf("resource postgres: creating the tables: %w", err)
	}
	for _, k := range keys {
		if _, err := conn.Exec(ctx, `INSERT INTO lockcheck_counter (key) VALUES ($1) ON CONFLICT DO NOTHING`, k); err != nil {
			return fmt.Errorf("resource postgres: row %s: %w", k, err)
		}
	}
	return nil
}

// TxLock is a lock whose grant is a transaction of the resource's database
// (the postgres backend's xact variant): the resource reads and writes
// inside it, so the write and the lock commit together or not at all.
type TxLock interface {
	// Tx is the transaction that holds key's lock, nil when none does.
	Tx(key string) pgx.Tx
}

// querier is a session or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Store is a worker's client of the resource. It keeps one session, opened
// when first needed and dropped after any error (the next request opens
// another), and uses the lock's transaction instead when the lock has one.
type Store struct {
	addr    string
	timeout time.Duration
	fenced  bool
	conn    *pgx.Conn
	lock    TxLock
}

var _ resource.Resource = (*Store)(nil)

// Open returns a client of the resource on the node at addr; fenced makes
// writes conditional on their fence.
func Open(addr string, timeout time.Duration, fenced bool) *Store {
	return &Store{addr: addr, timeout: timeout, fenced: fenced}
}

// InLockTx makes the store read and write inside the lock's transaction
// whenever it holds one.
func (s *Store) InLockTx(l TxLock) { s.lock = l }

// Close ends the store's session.
func (s *Store) Close() error {
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close(context.Background())
	s.conn = nil
	return err
}

// on is where a request on key runs: the lock's transaction, else the
// store's session.
func (s *Store) on(ctx context.Context, key string) (querier, error) {
	if s.lock != nil {
		if tx := s.lock.Tx(key); tx != nil {
			return tx, nil
		}
	}
	if s.conn == nil || s.conn.IsClosed() {
		conn, err := postgres.Connect(ctx, s.addr, s.timeout)
		if err != nil {
			return nil, err
		}
		s.conn = conn
	}
	return s.conn, nil
}

// failed drops the session after an error: its state is unknown.
func (s *Store) failed(err error) error {
	if err != nil && s.conn != nil {
		s.conn.Close(context.Background()) //nolint:errcheck // dropping it
		s.conn = nil
	}
	return err
}

// Read reads the key's counter; in fenced mode it also records the
// reader's fence, so that no lower fence can write after it.
func (s *Store) Read(ctx context.Context, r resource.ReadRequest) (resource.ReadReply, error) {
	q, err := s.on(ctx, r.Key)
	if err != nil {
		return resource.ReadReply{}, err
	}
	var v int64
	if s.fenced && r.Fence != nil {
		err = q.QueryRow(ctx, `UPDATE lockcheck_counter SET read_fence = GREATEST(read_fence, $2) WHERE key = $1 RETURNING value`, r.Key, *r.Fence).Scan(&v)
	} else {
		err = q.QueryRow(ctx, `SELECT value FROM lockcheck_counter WHERE key = $1`, r.Key).Scan(&v)
	}
	return resource.ReadReply{Value: v}, s.failed(err)
}

// NextFence draws the next number of the database's fence sequence.
func (s *Store) NextFence(ctx context.Context, r resource.FenceRequest) (resource.FenceReply, error) {
	q, err := s.on(ctx, r.Key)
	if err != nil {
		return resource.FenceReply{}, err
	}
	var f int64
	err = q.QueryRow(ctx, `SELECT nextval('lockcheck_fence')`).Scan(&f)
	return resource.FenceReply{Fence: f}, s.failed(err)
}

// Write writes the counter, in fenced mode only if the database's own
// condition fence_token < $fence AND read_fence <= $fence holds, and appends the write to the audit
// table in the same transaction.
func (s *Store) Write(ctx context.Context, r resource.WriteRequest) (resource.WriteReply, error) {
	q, err := s.on(ctx, r.Key)
	if err != nil {
		return resource.WriteReply{}, err
	}
	var reply resource.WriteReply
	run := func(tx pgx.Tx) error {
		var err error
		reply, err = write(ctx, tx, r, s.fenced)
		return err
	}
	if tx, ok := q.(pgx.Tx); ok {
		// The lock's transaction: its commit, the release, makes it stick.
		return reply, run(tx)
	}
	return reply, s.failed(pgx.BeginFunc(ctx, s.conn, run))
}

func write(ctx context.Context, tx pgx.Tx, r resource.WriteRequest, fenced bool) (resource.WriteReply, error) {
	var prev, highest, highestRead int64
	// The row lock orders the key's writes and their audit entries.
	if err := tx.QueryRow(ctx, `SELECT value, fence_token, read_fence FROM lockcheck_counter WHERE key = $1 FOR UPDATE`, r.Key).Scan(&prev, &highest, &highestRead); err != nil {
		return resource.WriteReply{}, err
	}
	reply := resource.WriteReply{Prev: prev}
	var (
		tag pgconn.CommandTag
		err error
	)
	if fenced {
		tag, err = tx.Exec(ctx, `UPDATE lockcheck_counter SET value = $2, fence_token = $3 WHERE key = $1 AND fence_token < $3 AND read_fence <= $3`, r.Key, r.Value, r.Fence)
	} else {
		tag, err = tx.Exec(ctx, `UPDATE lockcheck_counter SET value = $2 WHERE key = $1`, r.Key, r.Value)
	}
	if err != nil {
		return reply, err
	}
	reply.Accepted = tag.RowsAffected() == 1
	if !reply.Accepted {
		reply.Reason = refusal(r.Fence, highest, highestRead)
	}
	_, err = tx.Exec(ctx, `INSERT INTO lockcheck_audit (at, key, process, req, fence, read, value, prev, accepted, reason)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		history.Now(), r.Key, int(r.Process), r.Req, r.Fence, r.Read, r.Value, prev, reply.Accepted, reply.Reason)
	return reply, err
}

// refusal says why the conditional UPDATE matched no row.
func refusal(fence *int64, highest, highestRead int64) string {
	switch {
	case fence == nil:
		return "no fence (UPDATE ... WHERE fence_token < NULL matches no row)"
	case *fence <= highest:
		return fmt.Sprintf("fence %d is not above fence_token %d (UPDATE ... WHERE fence_token < %d matched no row)", *fence, highest, *fence)
	}
	return fmt.Sprintf("fence %d is below read_fence %d, shown by a read (UPDATE ... WHERE read_fence <= %d matched no row)", *fence, highestRead, *fence)
}

// Export writes the audit table's rows after seq after (0: all), in
// bigserial order, to log as resource.jsonl (one history.ResourceEntry
// per line), handing each to each if it is not nil, and returns the last
// seq written (after when none was): a soak's segments export their
// share of one table in turn.
func Export(ctx context.Context, addr string, log io.Writer, after int64, each func(*history.ResourceEntry)) (int64, error) {
	conn, err := postgres.Connect(ctx, addr, 5*time.Second)
	if err != nil {
		return after, fmt.Errorf("resource postgres: exporting the audit table: %w", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT seq, at, key, process, req, fence, read, value, prev, accepted, reason FROM lockcheck_audit WHERE seq > $1 ORDER BY seq`, after)
	if err != nil {
		return after, err
	}
	defer rows.Close()
	w := bufio.NewWriter(log)
	enc := json.NewEncoder(w)
	last := after
	for rows.Next() {
		var (
			e       history.ResourceEntry
			process int
		)
		if err := rows.Scan(&e.Seq, &e.Time, &e.Key, &process, &e.Req, &e.Fence, &e.Read, &e.Value, &e.Prev, &e.Accepted, &e.Reason); err != nil {
			return last, err
		}
		e.Process = history.Process(process)
		if err := enc.Encode(e); err != nil {
			return last, err
		}
		if each != nil {
			each(&e)
		}
		last = e.Seq
	}
	if err := rows.Err(); err != nil {
		return last, err
	}
	return last, w.Flush()
}
