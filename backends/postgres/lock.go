package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockcheck/lockcheck/backends"
)

// Variants of the postgres backend.
const (
	// Session holds pg_try_advisory_lock on a session the client keeps
	// open; pg_advisory_unlock releases it. Terminating the session frees
	// the lock at once; the client learns at its next statement.
	Session = "session"
	// Xact takes pg_try_advisory_xact_lock inside a transaction that also
	// reads and writes the resource's row (--resource postgres); the
	// commit is the release, so the lock and the write commit together or
	// not at all.
	Xact = "xact"
)

// Variants lists them, the default first.
var Variants = []string{Session, Xact}

// FenceSequence is the sequence a grant's fence is drawn from
// (--fence-source lock), right after the grant, on the lock's session.
const FenceSequence = "lockcheck_lock_fence"

// Options configure a client.
type Options struct {
	// Client: a session lock has no TTL; Fence draws a fence from
	// FenceSequence after each grant.
	backends.Client
	// Addrs are the cluster's nodes; the client's session is on the first
	// that accepts writes, so that after a failover it finds the promoted
	// standby.
	Addrs   []string
	Variant string
	// ExecMode is how the client sends its statements, pgx's
	// default_query_exec_mode; the zero value is pgx's default,
	// cache_statement: each statement is prepared once per connection,
	// under a name derived from its text, and executed by that name
	// (ExecModes).
	ExecMode pgx.QueryExecMode
	// Via names the pooler the client reaches the server through, if any:
	// the grants say so, since its death ends their sessions.
	Via string
}

// ExecModes name pgx's default_query_exec_mode settings, as its connection
// strings do. Through a pooler in transaction mode, the statement cache of
// cache_statement and cache_describe lives on whichever server connection
// the pooler picked, which the next statement may not get: PgBouncer 1.18
// keeps no prepared statements, so a statement fails as "prepared statement
// ... does not exist" (26000) or "already exists" (42P05).
var ExecModes = map[string]pgx.QueryExecMode{
	"cache_statement": pgx.QueryExecModeCacheStatement,
	"cache_describe":  pgx.QueryExecModeCacheDescribe,
	"describe_exec":   pgx.QueryExecModeDescribeExec,
	"exec":            pgx.QueryExecModeExec,
	"simple_protocol": pgx.QueryExecModeSimpleProtocol,
}

// DefaultExecMode is pgx's own default.
const DefaultExecMode = "cache_statement"

// Lock is one client's advisory lock. It keeps one session; any error drops
// it (ending whatever it held) and the next acquire opens another.
type Lock struct {
	opts Options
	conn *pgx.Conn
	// tx holds the xact variant's lock, on txKey.
	tx    pgx.Tx
	txKey string
	// held are the session locks granted and not released.
	held map[string]bool
}

// New returns a client; it connects at its first acquire.
func New(opts Options) (*Lock, error) {
	if opts.Variant == "" {
		opts.Variant = Session
	}
	if opts.Variant != Session && opts.Variant != Xact {
		return nil, fmt.Errorf("postgres backend has no variant %q", opts.Variant)
	}
	if len(opts.Addrs) == 0 {
		return nil, errors.New("postgres backend needs the address of at least one node")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Second
	}
	return &Lock{opts: opts, held: map[string]bool{}}, nil
}

// KeyID is the advisory lock's bigint key for a lock name.
func KeyID(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int64(h.Sum64())
}

// sessionName names a server session: the node's cluster_name and the
// backend's pid.
func sessionName(node string, pid int32) string { return backends.SessionName(node, int64(pid)) }

// onSession is what a statement appends to its select list to name the
// server session it ran on: behind a pooler in transaction mode each
// statement may run on another, so none is named once per connection.
const onSession = `, current_setting('cluster_name'), pg_backend_pid()`

// connect opens the client's session if it has none.
func (l *Lock) connect(ctx context.Context) error {
	if l.conn != nil && !l.conn.IsClosed() {
		return nil
	}
	cfg, err := connConfig(l.opts.Addrs, l.opts.Timeout, "read-write", l.opts.Source)
	if err != nil {
		return err
	}
	if l.opts.ExecMode != 0 {
		cfg.DefaultQueryExecMode = l.opts.ExecMode
	}
	l.conn, err = pgx.ConnectConfig(ctx, cfg)
	return err
}

// drop ends the session after an error: what it held is gone with it, or
// will be once the server notices.
func (l *Lock) drop(err error) error {
	if l.conn != nil {
		l.conn.Close(context.Background()) //nolint:errcheck // dropping it
	}
	l.conn, l.tx, l.txKey = nil, nil, ""
	clear(l.held)
	return err
}

// Acquire tries the lock once, without waiting.
func (l *Lock) Acquire(ctx context.Context, key string) (backends.Grant, error) {
	if len(l.held) > 0 || l.tx != nil {
		// The client gave up on a grant without releasing it (an
		// operation on the resource failed): a fresh session, so that no
		// forgotten lock outlives its holder's belief.
		l.drop(nil) //nolint:errcheck // no error to return
	}
	if err := l.connect(ctx); err != nil {
		return backends.Grant{}, err
	}
	var (
		got  bool
		node string
		pid  int32
		err  error
	)
	if l.opts.Variant == Xact {
		if l.tx, err = l.conn.Begin(ctx); err != nil {
			return backends.Grant{}, l.drop(err)
		}
		err = l.tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`+onSession, KeyID(key)).Scan(&got, &node, &pid)
		if err == nil && !got {
			err = l.tx.Rollback(ctx)
			l.tx = nil
			if err == nil {
				return backends.Grant{}, backends.ErrNotAcquired
			}
		}
		l.txKey = key
	} else {
		err = l.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`+onSession, KeyID(key)).Scan(&got, &node, &pid)
		if err == nil && !got {
			return backends.Grant{}, backends.ErrNotAcquired
		}
		l.held[key] = true
	}
	if err != nil {
		return backends.Grant{}, l.drop(err)
	}
	// No TTL: the lease lasts as long as the session (or transaction).
	// The client learns that it ended only at its next statement, so its
	// belief has no deadline and nothing closes Lost.
	session := sessionName(node, pid)
	g := backends.Grant{Token: session, Session: session, Via: l.opts.Via, Lost: make(chan struct{})}
	if l.opts.Fence {
		var fence int64
		if err := l.conn.QueryRow(ctx, `SELECT nextval('`+FenceSequence+`')`).Scan(&fence); err != nil {
			return backends.Grant{}, l.drop(err)
		}
		g.Fence = &fence
	}
	return g, nil
}

// Extend has nothing to push out: it confirms that the session still
// holds the lock.
func (l *Lock) Extend(ctx context.Context, key string, _ backends.Grant) (bool, error) {
	if l.conn == nil {
		return false, nil
	}
	held, err := l.holds(ctx, l.conn, key)
	if err != nil {
		return false, l.drop(err)
	}
	return held, nil
}

// holds asks the server whether this session holds key's advisory lock.
func (l *Lock) holds(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, key string) (bool, error) {
	var held bool
	classid, objid := split(KeyID(key))
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
		AND classid = $1 AND objid = $2 AND objsubid = 1 AND granted)`, classid, objid).Scan(&held)
	return held, err
}

// split is how pg_locks shows a bigint advisory key: its high and low 32
// bits as oids.
func split(id int64) (uint32, uint32) { return uint32(uint64(id) >> 32), uint32(uint64(id)) }

// Release gives the lock up and reports whether it was still held: the
// session variant's pg_advisory_unlock returns false (with a warning) when
// the session did not hold it; the xact variant's commit releases it.
func (l *Lock) Release(ctx context.Context, key string, g backends.Grant) (bool, error) {
	released, _, err := l.ReleaseOn(ctx, key, g)
	return released, err
}

// ReleaseOn is Release, naming the server session the unlock ran on
// (backends.SessionLock): through a pooler in transaction mode it may be
// another than the grant's, where pg_advisory_unlock finds nothing to
// release. The xact variant's commit runs on the transaction's session.
func (l *Lock) ReleaseOn(ctx context.Context, key string, g backends.Grant) (bool, string, error) {
	if l.conn == nil {
		return false, "", errors.New("postgres: no session to release from (it was dropped after an error)")
	}
	if l.opts.Variant == Xact {
		if l.tx == nil || l.txKey != key {
			return false, "", nil
		}
		err := l.tx.Commit(ctx)
		l.tx, l.txKey = nil, ""
		if err != nil {
			return false, "", l.drop(err)
		}
		return true, g.Session, nil
	}
	var (
		released bool
		node     string
		pid      int32
	)
	if err := l.conn.QueryRow(ctx, `SELECT pg_advisory_unlock($1)`+onSession, KeyID(key)).Scan(&released, &node, &pid); err != nil {
		return false, "", l.drop(err)
	}
	delete(l.held, key)
	return released, sessionName(node, pid), nil
}

// Tx is the transaction holding key's lock (xact variant), nil when none
// does: the resource writes inside it.
func (l *Lock) Tx(key string) pgx.Tx {
	if l.tx != nil && l.txKey == key {
		return l.tx
	}
	return nil
}

// Inspect says which session holds key's advisory lock, if any.
func (l *Lock) Inspect(ctx context.Context, key string) (string, error) {
	desc, _, err := l.InspectHolder(ctx, key)
	return desc, err
}

// InspectHolder is Inspect, naming the session that holds key
// (backends.SessionLock). It is lockcheck's own look, not the
// application's: it asks in the simple protocol, which any pooler passes.
func (l *Lock) InspectHolder(ctx context.Context, key string) (string, string, error) {
	conn, err := ConnectPrimary(ctx, l.opts.Addrs, l.opts.Timeout, l.opts.Source)
	if err != nil {
		return "", "", err
	}
	defer conn.Close(context.Background())
	classid, objid := split(KeyID(key))
	var (
		node string
		pids []int32
	)
	rows, err := conn.Query(ctx, `SELECT current_setting('cluster_name'), pid FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 1 AND granted ORDER BY pid`,
		pgx.QueryExecModeSimpleProtocol, classid, objid)
	if err != nil {
		return "", "", err
	}
	defer rows.Close()
	for rows.Next() {
		var pid int32
		if err := rows.Scan(&node, &pid); err != nil {
			return "", "", err
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		return "", "", err
	}
	if len(pids) == 0 {
		return key + ": free (no session holds its advisory lock)", "", nil
	}
	holder := sessionName(node, pids[0])
	return fmt.Sprintf("%s: advisory lock held by server session %s (backend pid %v)", key, holder, pids), holder, nil
}

// Close ends the session, and with it every lock it held.
func (l *Lock) Close() error {
	if l.conn == nil {
		return nil
	}
	err := l.conn.Close(context.Background())
	l.conn = nil
	return err
}
