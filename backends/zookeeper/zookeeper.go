// Package zookeeper is the ZooKeeper lock backend: ZooKeeper's lock recipe
// (ephemeral sequential children of /lockcheck/<key>, the lowest one holds
// the lock) through github.com/go-zookeeper/zk, one session per client
// whose timeout is the lease, and the lock node's czxid as the fence. Its
// topology is an ensemble of three servers of Debian's zookeeper package,
// each a JVM that lockcheck configures and starts (see server.go).
package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockcheck/lockcheck/backends"
)

// Recipe is the one variant: ZooKeeper's own lock recipe.
const Recipe = "recipe"

// Variants lists every variant, the correct one first.
var Variants = []string{Recipe}

// Root is the persistent node under which every lock lives: the lock
// lock-0 is the set of children of /lockcheck/lock-0, one per client that
// wants it.
const Root = "/lockcheck"

// nodePrefix names a lock node: zk.Lock's own, so that its clients and
// these take turns on the same lock.
const nodePrefix = "lock-"

// Options configure a client.
type Options struct {
	// Client: the TTL is the session timeout asked for, which the servers
	// clamp (see SessionTimeout; the grant reports what they granted);
	// Fence makes grants carry the lock node's czxid.
	backends.Client
	Servers []string
}

// Lock is a ZooKeeper lock client. It keeps one session and replaces it
// once it was disconnected or its outcome is in doubt. A Lock is used by
// one goroutine at a time, as the workload's client loop does.
type Lock struct {
	opts Options
	s    *session
	// dirs are the lock nodes known to exist; they are persistent.
	dirs map[string]bool
}

// New returns a client of the ensemble at opts.Servers. It connects at the
// first operation.
func New(opts Options) (*Lock, error) {
	if len(opts.Servers) == 0 {
		return nil, errors.New("zookeeper backend needs at least one server")
	}
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	return &Lock{opts: opts, dirs: map[string]bool{}}, nil
}

// session is one ZooKeeper session and what its client learned of it.
type session struct {
	conn *zk.Conn
	// lost is closed at the first disconnection after the session was
	// established: from then on the client cannot know whether the
	// servers expired it, so a careful client gives its locks up (as
	// Curator does on SUSPENDED). An expiry is seen as a disconnection
	// first, and again as StateExpired on reconnecting.
	lost     chan struct{}
	lostOnce sync.Once
	ready    chan struct{} // closed once the servers granted the session

	mu          sync.Mutex
	established bool
	id          int64
	timeout     time.Duration
}

// event watches the session's state.
func (s *session) event(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.State {
	case zk.StateHasSession:
		s.established = true
	case zk.StateDisconnected, zk.StateExpired:
		if s.established {
			s.lostOnce.Do(func() { close(s.lost) })
		}
	}
}

// authenticated is how the library logs a granted session, the one place
// it tells the timeout the servers negotiated.
const authenticated = "authenticated: id=%d, timeout=%d"

// Printf takes the library's log: it goes to stderr (a worker's log), and
// the line that tells the granted session sets its id and timeout.
func (s *session) Printf(format string, args ...any) {
	if format == authenticated && len(args) == 2 {
		id, _ := args[0].(int64)
		ms, _ := args[1].(int32)
		s.mu.Lock()
		// A later line is a reconnection, or a new session the library
		// opened after this one expired: this one stays what it was.
		first := s.id == 0
		if first {
			s.id, s.timeout = id, time.Duration(ms)*time.Millisecond
		}
		s.mu.Unlock()
		if first {
			close(s.ready)
		}
	}
	slog.Info("zookeeper client: " + fmt.Sprintf(format, args...))
}

// granted is the session's id and the timeout the servers granted.
func (s *session) granted() (int64, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id, s.timeout
}

func (s *session) isLost() bool {
	select {
	case <-s.lost:
		return true
	default:
		return false
	}
}

// session returns the client's session, starting one when there is none
// or the current one was disconnected since it began.
func (l *Lock) session(ctx context.Context) (*session, error) {
	if l.s != nil && !l.s.isLost() {
		return l.s, nil
	}
	l.abandon()
	s := &session{lost: make(chan struct{}), ready: make(chan struct{})}
	conn, _, err := zk.Connect(l.opts.Servers, l.opts.TTL, zk.WithLogger(s), zk.WithEventCallback(s.event), zk.WithDialer(dialer(l.opts.Source)))
	if err != nil {
		return nil, err
	}
	s.conn = conn
	select {
	case <-s.ready:
		l.s = s
		return s, nil
	case <-ctx.Done():
		go conn.Close()
		return nil, fmt.Errorf("no session within %s: %w", l.opts.Timeout, ctx.Err())
	}
}

// dialer connects from source (none: wherever the system picks).
func dialer(source string) zk.Dialer {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return backends.Dialer(source, timeout)(ctx, network, addr)
	}
}

// abandon gives the session up: closing it deletes its lock nodes, and if
// the close does not reach the servers they expire it within its timeout.
func (l *Lock) abandon() {
	if l.s != nil {
		go l.s.conn.Close() // it waits up to a second for the servers' answer
		l.s = nil
	}
}

// call runs one request of the library, which has no context of its own,
// within ctx. A request still running when ctx ends keeps running until the
// session it belongs to is abandoned.
func call[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// refusal is an error after which the lock was certainly not granted: a
// fail, not an info.
type refusal struct{ err error }

func (r refusal) Error() string   { return "not granted: " + r.err.Error() }
func (r refusal) Unwrap() []error { return []error{backends.ErrNotAcquired, r.err} }

// answered reports whether err is the servers' answer to a request, which
// therefore did not take effect: the node existed already, or did not, ...
// A lost connection, an expired session, a closing client or a timeout
// leave the request's fate unknown.
func answered(err error) bool {
	for _, e := range []error{zk.ErrNoNode, zk.ErrNodeExists, zk.ErrBadVersion, zk.ErrNoAuth, zk.ErrNotEmpty,
		zk.ErrNoChildrenForEphemerals, zk.ErrInvalidACL, zk.ErrInvalidFlags, zk.ErrAPIError, zk.ErrBadArguments} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Acquire makes one attempt at the recipe: create an ephemeral sequential
// child of the lock node; it holds the lock if it is the lowest child,
// else it is deleted again and the acquire is refused. (The recipe's
// waiting form, zk.Lock, watches the next lower child instead and cannot
// be bounded by a timeout; the client loop retries after --retry.)
func (l *Lock) Acquire(ctx context.Context, key string) (backends.Grant, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	// Until the create is sent, nothing can have been granted.
	s, err := l.session(ctx)
	if err != nil {
		return backends.Grant{}, refusal{err}
	}
	dir := Root + "/" + key
	if err := l.ensureDir(ctx, s, dir); err != nil {
		return backends.Grant{}, refusal{err}
	}
	_, timeout := s.granted()
	lost := s.lost
	path, err := call(ctx, func() (string, error) {
		return s.conn.Create(dir+"/"+nodePrefix, nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	})
	switch {
	case answered(err):
		return backends.Grant{}, refusal{err}
	case err != nil:
		// The node may exist and even hold the lock: the session that
		// owns it must not live on.
		l.abandon()
		return backends.Grant{}, err
	}
	children, err := call(ctx, func() ([]string, error) {
		c, _, err := s.conn.Children(dir)
		return c, err
	})
	if err != nil {
		l.abandon()
		return backends.Grant{}, err
	}
	if !lowest(children, path) {
		_, err := call(ctx, func() (struct{}, error) { return struct{}{}, s.conn.Delete(path, -1) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			l.abandon()
			return backends.Grant{}, err
		}
		return backends.Grant{}, backends.ErrNotAcquired
	}
	g := backends.Grant{Token: path, TTL: timeout, Lost: lost}
	if l.opts.Fence {
		stat, err := call(ctx, func() (*zk.Stat, error) {
			ok, stat, err := s.conn.Exists(path)
			if err == nil && !ok {
				err = errors.New("the lock node vanished: the session expired")
			}
			return stat, err
		})
		if err != nil {
			l.abandon()
			return backends.Grant{}, err
		}
		g.Fence = &stat.Czxid
	}
	return g, nil
}

// ensureDir creates the persistent lock node dir and its parent once.
func (l *Lock) ensureDir(ctx context.Context, s *session, dir string) error {
	if l.dirs[dir] {
		return nil
	}
	for _, p := range []string{Root, dir} {
		_, err := call(ctx, func() (string, error) { return s.conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)) })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	l.dirs[dir] = true
	return nil
}

// lowest reports whether path is the child with the lowest sequence
// number. Children are named by their sequence number's ten digits at the
// end, so the lowest sorts first after the prefix.
func lowest(children []string, path string) bool {
	own := path[strings.LastIndexByte(path, '/')+1:]
	for _, c := range children {
		if seq(c) < seq(own) {
			return false
		}
	}
	return slices.Contains(children, own)
}

// seq is the sequence number ZooKeeper appended to a child's name.
func seq(child string) string {
	if len(child) < 10 {
		return child
	}
	return child[len(child)-10:]
}

// current is the session the grant was made in, if the client still has it.
func (l *Lock) current(g backends.Grant) (*session, bool) {
	if l.s == nil || (<-chan struct{})(l.s.lost) != g.Lost {
		return nil, false
	}
	return l.s, true
}

// Extend reports whether the grant's node is still there, owned by the
// session it was made in: the session keeps itself alive with the
// library's pings, so there is nothing to renew.
//
// The read is preceded by a sync. A follower answers reads from its own
// copy, and one cut off from the leader goes on answering for up to
// syncLimit ticks: it could show the node after the leader expired the
// session. A sync completes only through the leader, after everything it
// committed before reached this server, so an extend that is accepted read
// the ensemble's state; one whose sync cannot complete has an unknown
// outcome.
func (l *Lock) Extend(ctx context.Context, _ string, g backends.Grant) (bool, error) {
	s, ok := l.current(g)
	if !ok || s.isLost() {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	stat, err := call(ctx, func() (*zk.Stat, error) {
		if _, err := s.conn.Sync(g.Token); err != nil {
			return nil, err
		}
		ok, stat, err := s.conn.Exists(g.Token)
		if err == nil && !ok {
			return nil, nil
		}
		return stat, err
	})
	if err != nil {
		return false, err
	}
	id, _ := s.granted()
	return stat != nil && stat.EphemeralOwner == id, nil
}

// errGivenUp is a release's outcome when the grant's session was
// disconnected since the grant: the client closes the session instead of
// deleting the node, and the close may delete it at any moment.
var errGivenUp = errors.New("the session was disconnected since the grant: closing it instead, which may delete the lock node at any moment")

// Release deletes the grant's node. It reports false when the node was
// gone (the session expired). When the session was disconnected since the
// grant it gives the session up instead, and the node goes with it as soon
// as the close reaches a server that still has the session (a killed
// server's sessions move to the others). That is no "deleted nothing": a
// release that said so would keep the lease live in the history until its
// TTL, and the next grant, which the close made lawful, would look like a
// lease violation. Its outcome is unknown, so it is an error.
func (l *Lock) Release(ctx context.Context, _ string, g backends.Grant) (bool, error) {
	s, ok := l.current(g)
	if !ok {
		return false, nil
	}
	if s.isLost() {
		l.abandon()
		return false, errGivenUp
	}
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	_, err := call(ctx, func() (struct{}, error) { return struct{}{}, s.conn.Delete(g.Token, -1) })
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, zk.ErrNoNode):
		return false, nil
	}
	l.abandon()
	return false, err
}

// Inspect describes the lock: free, or held by its lowest child with the
// node's czxid and the session that owns it.
func (l *Lock) Inspect(ctx context.Context, key string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	s, err := l.session(ctx)
	if err != nil {
		return "", err
	}
	dir := Root + "/" + key
	children, err := call(ctx, func() ([]string, error) {
		c, _, err := s.conn.Children(dir)
		return c, err
	})
	if errors.Is(err, zk.ErrNoNode) || (err == nil && len(children) == 0) {
		return key + " is free", nil
	}
	if err != nil {
		return "", err
	}
	slices.SortFunc(children, func(a, b string) int { return strings.Compare(seq(a), seq(b)) })
	holder := dir + "/" + children[0]
	stat, err := call(ctx, func() (*zk.Stat, error) {
		_, stat, err := s.conn.Exists(holder)
		return stat, err
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s is held by %s (czxid %d) of session %#x; %d waiting", key, holder, stat.Czxid, stat.EphemeralOwner, len(children)-1), nil
}

// Close closes the session, which deletes its lock nodes.
func (l *Lock) Close() error {
	if l.s != nil {
		l.s.conn.Close()
		l.s = nil
	}
	return nil
}
