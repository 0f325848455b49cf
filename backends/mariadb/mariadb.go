package mariadb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockcheck/lockcheck/backends"
)

// GetLock is the backend's one variant: GET_LOCK(name, 0) on a session the
// client keeps open for the hold, released by RELEASE_LOCK.
const GetLock = "get-lock"

// Variants lists the backend's variants.
var Variants = []string{GetLock}

// Options configure a client.
type Options struct {
	// Client: the TTL is not the lease (WaitTimeout is), and a lock hands
	// out no fence.
	backends.Client
	Addr string
	// WaitTimeout is the wait_timeout the client sets on its session: the
	// server closes a connection idle that long, and with it every lock it
	// held. It is the grant's lease, which a statement on the session
	// renews. MariaDB counts it in whole seconds; 0 is the TTL rounded up.
	WaitTimeout time.Duration
}

// Lock is one client's GET_LOCK lock. It keeps one session; any error drops
// it (ending whatever it held) and the next acquire opens another.
type Lock struct {
	opts Options
	db   *sql.DB
	conn *sql.Conn
	node string
	// held are the locks granted and not released.
	held map[string]bool
}

// New returns a client of the server at opts.Addr; it connects at its
// first acquire.
func New(opts Options) (*Lock, error) {
	if opts.Addr == "" {
		return nil, errors.New("mariadb backend needs the server's address")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Second
	}
	opts.WaitTimeout = WaitTimeout(opts.WaitTimeout, opts.TTL)
	return &Lock{opts: opts, held: map[string]bool{}}, nil
}

// WaitTimeout is the wait_timeout a session gets: asked, rounded up to
// MariaDB's whole seconds, else ttl so rounded; at least a second.
func WaitTimeout(asked, ttl time.Duration) time.Duration {
	if asked <= 0 {
		asked = ttl
	}
	return max(1, (asked+time.Second-1)/time.Second) * time.Second
}

// open is a pool of connections to addr from source; lockcheck's own
// connections (inspection, cleaning, the service) take it too.
func open(addr string, timeout time.Duration, source string) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = User, "tcp", addr
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = timeout, timeout, timeout
	if source != "" {
		cfg.DialFunc = backends.Dialer(source, timeout)
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

// connect opens the client's session if it has none, with its
// wait_timeout.
func (l *Lock) connect(ctx context.Context) error {
	if l.conn != nil {
		return nil
	}
	db, err := open(l.opts.Addr, l.opts.Timeout, l.opts.Source)
	if err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err == nil {
		_, err = conn.ExecContext(ctx, fmt.Sprintf("SET SESSION wait_timeout = %d", int(l.opts.WaitTimeout.Seconds())))
	}
	if err == nil {
		err = conn.QueryRowContext(ctx, nodeName).Scan(&l.node)
	}
	if err != nil {
		db.Close() //nolint:errcheck // failed anyway
		return err
	}
	l.db, l.conn = db, conn
	return nil
}

// nodeName asks the server its name: the node's report_host, which
// lockcheck sets, else the host's name (a server it did not start).
const nodeName = `SELECT COALESCE(@@global.report_host, @@hostname)`

// drop ends the session after an error: what it held is gone with it, or
// will be once the server notices.
func (l *Lock) drop(err error) error {
	if l.db != nil {
		l.db.Close() //nolint:errcheck // dropping it
	}
	l.db, l.conn = nil, nil
	clear(l.held)
	return err
}

// Acquire tries the lock once, without waiting: GET_LOCK(key, 0) returns 1
// when granted, 0 when another session holds it.
func (l *Lock) Acquire(ctx context.Context, key string) (backends.Grant, error) {
	if len(l.held) > 0 {
		// The client gave up on a grant without releasing it: a fresh
		// session, so that no forgotten lock outlives its holder's belief.
		l.drop(nil) //nolint:errcheck // no error to return
	}
	if err := l.connect(ctx); err != nil {
		return backends.Grant{}, err
	}
	var (
		got sql.NullInt64
		id  int64
	)
	if err := l.conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, 0), CONNECTION_ID()`, key).Scan(&got, &id); err != nil {
		return backends.Grant{}, l.drop(err)
	}
	switch {
	case !got.Valid:
		return backends.Grant{}, l.drop(fmt.Errorf("mariadb: GET_LOCK(%q) returned NULL", key))
	case got.Int64 == 0:
		return backends.Grant{}, backends.ErrNotAcquired
	}
	l.held[key] = true
	// The lock lives as long as the session, which the server closes once
	// it has been idle for wait_timeout: that is the lease.
	session := backends.SessionName(l.node, id)
	return backends.Grant{Token: session, Session: session, TTL: l.opts.WaitTimeout}, nil
}

// Extend confirms, with a statement on the session (which renews its
// wait_timeout), that the session still holds the lock.
func (l *Lock) Extend(ctx context.Context, key string, _ backends.Grant) (bool, error) {
	if l.conn == nil {
		return false, nil
	}
	var mine sql.NullBool
	if err := l.conn.QueryRowContext(ctx, `SELECT IS_USED_LOCK(?) = CONNECTION_ID()`, key).Scan(&mine); err != nil {
		return false, l.drop(err)
	}
	return mine.Valid && mine.Bool, nil
}

// Release gives the lock up and reports whether the session held it.
func (l *Lock) Release(ctx context.Context, key string, g backends.Grant) (bool, error) {
	released, _, err := l.ReleaseOn(ctx, key, g)
	return released, err
}

// ReleaseOn is Release, naming the session it ran on
// (backends.SessionLock): RELEASE_LOCK returns 1 when this session held
// the lock, 0 when another does, NULL when none does.
func (l *Lock) ReleaseOn(ctx context.Context, key string, _ backends.Grant) (bool, string, error) {
	if l.conn == nil {
		return false, "", errors.New("mariadb: no session to release from (it was dropped after an error)")
	}
	var (
		released sql.NullInt64
		id       int64
	)
	if err := l.conn.QueryRowContext(ctx, `SELECT RELEASE_LOCK(?), CONNECTION_ID()`, key).Scan(&released, &id); err != nil {
		return false, "", l.drop(err)
	}
	delete(l.held, key)
	return released.Valid && released.Int64 == 1, backends.SessionName(l.node, id), nil
}

// Inspect says which session holds key, if any.
func (l *Lock) Inspect(ctx context.Context, key string) (string, error) {
	desc, _, err := l.InspectHolder(ctx, key)
	return desc, err
}

// InspectHolder is Inspect, naming the session that holds key
// (backends.SessionLock), on a connection of its own.
func (l *Lock) InspectHolder(ctx context.Context, key string) (string, string, error) {
	db, err := open(l.opts.Addr, l.opts.Timeout, l.opts.Source)
	if err != nil {
		return "", "", err
	}
	defer db.Close()
	var (
		id   sql.NullInt64
		node string
	)
	if err := db.QueryRowContext(ctx, `SELECT IS_USED_LOCK(?), `+nodeName[len("SELECT "):], key).Scan(&id, &node); err != nil {
		return "", "", err
	}
	if !id.Valid {
		return key + ": free (no session holds it: IS_USED_LOCK is NULL)", "", nil
	}
	holder := backends.SessionName(node, id.Int64)
	return fmt.Sprintf("%s: held by server session %s (connection id %d)", key, holder, id.Int64), holder, nil
}

// Close ends the session, and with it every lock it held.
func (l *Lock) Close() error {
	if l.db == nil {
		return nil
	}
	err := l.db.Close()
	l.db, l.conn = nil, nil
	return err
}
