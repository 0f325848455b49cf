// Package etcd is the etcd lock backend: a concurrency.Session whose lease
// is kept alive in the background, a concurrency.Mutex taken with one
// TryLock per acquire, and the lock key's create revision as the fence. Its
// topology is a three-member cluster of lockcheck processes, each running
// an embedded etcd member (see member.go).
package etcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/logutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/lockcheck/lockcheck/backends"
)

// Mutex is the one variant: etcd's own recipe, concurrency.Mutex on a
// concurrency.Session.
const Mutex = "mutex"

// Variants lists every variant, the correct one first.
var Variants = []string{Mutex}

// KeyPrefix is where the mutexes live: the mutex of lock-0 is the set of
// keys under lockcheck/lock-0/, one per session that wants it.
const KeyPrefix = "lockcheck/"

// SessionTTL is the lease length a session asks etcd for: ttl rounded up to
// whole seconds, etcd's unit, and at least one second. etcd raises it
// further to its minimum, which Timing.MinTTL computes.
func SessionTTL(ttl time.Duration) time.Duration {
	return max(time.Second, (ttl + time.Second - 1).Truncate(time.Second))
}

// Options configure a client.
type Options struct {
	// Client: the TTL is rounded as SessionTTL says; Fence makes grants
	// carry the lock key's create revision.
	backends.Client
	Endpoints []string
}

// Lock is an etcd lock client. It keeps one session and replaces it when
// its lease is gone or its state is in doubt. A Lock is used by one
// goroutine at a time, as the workload's client loop does.
type Lock struct {
	opts    Options
	cli     *clientv3.Client
	session *concurrency.Session
}

// New returns a client of the cluster at opts.Endpoints.
func New(opts Options) (*Lock, error) {
	if len(opts.Endpoints) == 0 {
		return nil, errors.New("etcd backend needs at least one endpoint")
	}
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	logger, err := logutil.CreateDefaultZapLogger(zap.WarnLevel)
	if err != nil {
		return nil, err
	}
	cfg := clientv3.Config{
		Endpoints:   opts.Endpoints,
		DialTimeout: opts.Timeout,
		Logger:      logger,
	}
	if opts.Source != "" {
		dial := backends.Dialer(opts.Source, opts.Timeout)
		cfg.DialOptions = []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dial(ctx, "tcp", addr)
		})}
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Lock{opts: opts, cli: cli}, nil
}

// Acquire renews (or starts) the session, then tries the mutex once.
//
// The renewal is what makes the grant's TTL a promise measured from this
// call: the lease, and with it the lock key, lives at least a TTL past the
// moment the leader renewed it, which is after the acquire began. A lease
// only renewed by the background keepalive may have been renewed up to
// TTL/3 (and clientv3's 500 ms keepalive tick) earlier.
func (l *Lock) Acquire(ctx context.Context, key string) (backends.Grant, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	s, ttl, err := l.renewedSession(ctx)
	if err != nil {
		return backends.Grant{}, err
	}
	m := concurrency.NewMutex(s, KeyPrefix+key)
	switch err := m.TryLock(ctx); {
	case errors.Is(err, concurrency.ErrLocked):
		// TryLock deleted its waiter key before saying so.
		return backends.Grant{}, backends.ErrNotAcquired
	case err != nil:
		// The waiter key may have been written, or not deleted: a session
		// that may own a stray key must not keep it alive.
		l.abandon()
		return backends.Grant{}, err
	}
	g := backends.Grant{Token: m.Key(), TTL: ttl, Lost: s.Done()}
	if l.opts.Fence {
		rev := createRevision(m)
		g.Fence = &rev
	}
	return g, nil
}

// createRevision is the create revision of the mutex's own key, the fence
// etcd's documentation recommends. Mutex keeps it unexported; IsOwner is
// the comparison "the key's create revision equals mine" and carries it.
func createRevision(m *concurrency.Mutex) int64 {
	owner := pb.Compare(m.IsOwner())
	return owner.GetCreateRevision()
}

// renewedSession returns the session with its lease renewed during this
// call, and the TTL etcd granted, starting a new session when there is
// none or its lease is gone.
func (l *Lock) renewedSession(ctx context.Context) (*concurrency.Session, time.Duration, error) {
	if l.session != nil {
		select {
		case <-l.session.Done():
			// The keepalive gave up: the lease is gone or soon will be.
			l.session = nil
		default:
			resp, err := l.cli.KeepAliveOnce(ctx, l.session.Lease())
			switch {
			case err == nil:
				return l.session, time.Duration(resp.TTL) * time.Second, nil
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				l.session.Orphan()
				l.session = nil
			default:
				return nil, 0, err
			}
		}
	}
	lease, err := l.cli.Grant(ctx, int64(SessionTTL(l.opts.TTL)/time.Second))
	if err != nil {
		return nil, 0, err
	}
	// etcd grants at least its minimum TTL, whatever was asked: the
	// session and the grant report what it granted.
	s, err := concurrency.NewSession(l.cli, concurrency.WithLease(lease.ID), concurrency.WithTTL(int(lease.TTL)))
	if err != nil {
		return nil, 0, err
	}
	l.session = s
	return s, time.Duration(lease.TTL) * time.Second, nil
}

// abandon gives the session up after an operation with an unknown outcome:
// its keepalive stops, and its lease is revoked in the background, or
// expires within the TTL, taking any key the operation left with it.
func (l *Lock) abandon() {
	s := l.session
	l.session = nil
	if s == nil {
		return
	}
	s.Orphan()
	go func() {
		ctx, cancel := context.WithTimeout(l.cli.Ctx(), l.opts.Timeout)
		defer cancel()
		l.cli.Revoke(ctx, s.Lease()) //nolint:errcheck // the lease expires anyway
	}()
}

// Extend renews the session's lease if g's key still exists. The session
// keeps the lease alive by itself; Extend is an explicit, checked renewal.
func (l *Lock) Extend(ctx context.Context, key string, g backends.Grant) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	if l.session == nil || g.Token != fmt.Sprintf("%s%s/%x", KeyPrefix, key, l.session.Lease()) {
		return false, nil // the grant's session was given up
	}
	_, err := l.cli.KeepAliveOnce(ctx, l.session.Lease())
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	resp, err := l.cli.Get(ctx, g.Token, clientv3.WithCountOnly())
	if err != nil {
		return false, err
	}
	return resp.Count == 1, nil
}

// Release deletes the grant's key. Mutex.Unlock is this same delete, but
// does not say whether the key was still there: after the session's lease
// expired, it is not.
func (l *Lock) Release(ctx context.Context, key string, g backends.Grant) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	resp, err := l.cli.Delete(ctx, g.Token)
	if err != nil {
		l.abandon()
		return false, err
	}
	return resp.Deleted == 1, nil
}

// Inspect describes the mutex: free, or held by a session's key with the
// time its lease has left.
func (l *Lock) Inspect(ctx context.Context, key string) (string, error) {
	resp, err := l.cli.Get(ctx, KeyPrefix+key+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return key + " is free", nil
	}
	kv := resp.Kvs[0]
	ttl, err := l.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s is held by %s (create revision %d) under lease %x with %d s left", key, kv.Key, kv.CreateRevision, kv.Lease, ttl.TTL), nil
}

// Close revokes the session's lease, freeing any lock it holds, and closes
// the client.
func (l *Lock) Close() error {
	if l.session != nil {
		l.session.Close() //nolint:errcheck // an unrevoked lease expires by itself
	}
	return l.cli.Close()
}
