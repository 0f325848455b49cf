// Package redsync is the lock backend of github.com/go-redsync/redsync/v4,
// the Go Redlock library most teams would adopt, run over the same five
// independent Redis masters as lockcheck's own Redlock so the two can be
// compared under the same faults.
package redsync

import (
	"context"
	"errors"
	"fmt"
	"time"

	rs "github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/redlock"
)

// Lock is a redsync client. lockcheck's flags map onto redsync's options:
// --ttl is WithExpiry, --redlock-tries WithTries, --redlock-retry-delay
// WithRetryDelay, --redlock-drift-factor WithDriftFactor, and
// --redlock-node-timeout becomes WithTimeoutFactor (a fraction of the
// expiry) as well as each connection's timeouts.
type Lock struct {
	opts    redlock.Options
	cluster *redlock.Cluster
	sync    *rs.Redsync
}

// New returns a redsync client of the nodes in opts.
func New(opts redlock.Options) (*Lock, error) {
	if len(opts.Nodes) == 0 {
		return nil, errors.New("redsync needs at least one node")
	}
	if opts.TTL <= 0 {
		return nil, errors.New("redsync needs a positive TTL")
	}
	if opts.NodeTimeout <= 0 {
		opts.NodeTimeout = max(opts.TTL/10, time.Millisecond)
	}
	if opts.DriftFactor <= 0 {
		opts.DriftFactor = redlock.DefaultDriftFactor
	}
	if opts.Tries <= 0 {
		opts.Tries = 1
	}
	cluster := redlock.Dial(opts.Nodes, opts.NodeTimeout, opts.Source)
	pools := make([]rsredis.Pool, 0, len(opts.Nodes))
	for _, rdb := range cluster.Clients() {
		pools = append(pools, rsgoredis.NewPool(rdb))
	}
	return &Lock{opts: opts, cluster: cluster, sync: rs.New(pools...)}, nil
}

func (l *Lock) mutex(key string, extra ...rs.Option) *rs.Mutex {
	options := []rs.Option{
		rs.WithExpiry(l.opts.TTL),
		rs.WithTries(l.opts.Tries),
		rs.WithDriftFactor(l.opts.DriftFactor),
		rs.WithTimeoutFactor(float64(l.opts.NodeTimeout) / float64(l.opts.TTL)),
	}
	if l.opts.RetryDelay > 0 {
		options = append(options, rs.WithRetryDelay(l.opts.RetryDelay))
	}
	return l.sync.NewMutex(key, append(options, extra...)...)
}

// Acquire is redsync's LockContext. Every error it returns follows a round
// that redsync released on every node: the client holds nothing and acts on
// nothing, so each is a certain refusal.
func (l *Lock) Acquire(ctx context.Context, key string) (backends.Grant, error) {
	m := l.mutex(key)
	if err := m.LockContext(ctx); err != nil {
		return backends.Grant{}, fmt.Errorf("%w: %v", backends.ErrNotAcquired, err)
	}
	g := backends.Grant{Token: m.Value(), TTL: l.opts.TTL, Deadline: m.Until()}
	if l.opts.Fence {
		// redsync has no fence; the backend's own is the same INCR fence as
		// lockcheck's Redlock, over every node.
		fence, err := redlock.IncrFence(ctx, l.cluster, key)
		if err != nil {
			return g, fmt.Errorf("lock taken but the fence could not be drawn: %w", err)
		}
		g.Fence = &fence
	}
	return g, nil
}

// Release is redsync's UnlockContext for the grant's token. It reports
// whether a majority deleted the key; redsync returns an error with that
// false, which is no unknown outcome when the nodes answered.
func (l *Lock) Release(ctx context.Context, key string, g backends.Grant) (bool, error) {
	ok, err := l.mutex(key, rs.WithValue(g.Token)).UnlockContext(ctx)
	if ok || !unreachable(err) {
		return ok, nil
	}
	return false, err
}

// Extend is redsync's ExtendContext for the grant's token.
func (l *Lock) Extend(ctx context.Context, key string, g backends.Grant) (bool, error) {
	ok, err := l.mutex(key, rs.WithValue(g.Token)).ExtendContext(ctx)
	if ok || !unreachable(err) {
		return ok, nil
	}
	return false, err
}

// unreachable tells whether a redsync error involved a node that did not
// answer, as opposed to nodes that answered "not yours".
func unreachable(err error) bool {
	var re *rs.RedisError
	return errors.As(err, &re)
}

// Inspect describes the key on every node.
func (l *Lock) Inspect(ctx context.Context, key string) (string, error) {
	return redlock.InspectCluster(ctx, l.cluster, key)
}

// Close closes the connection pools.
func (l *Lock) Close() error { return l.cluster.Close() }
