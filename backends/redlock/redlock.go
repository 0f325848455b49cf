// Package redlock is lockcheck's own implementation of the Redlock algorithm
// as redis.io describes it, over independent Redis masters: SET key token NX
// PX ttl on every node in parallel, each with a timeout small against the
// TTL; the lock is won on a majority of nodes within the TTL; its validity is
// TTL − elapsed − drift; a round that is not won is released everywhere.
//
// Redlock's safety rests on nodes that keep their keys for the whole TTL: a
// node whose clock jumps forward, or that restarts without persistence,
// forgets the key, and a second client can then win a majority while the
// first still holds the lock. lockcheck's faults aim there.
package redlock

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/redis"
)

// NodeCount is how many independent masters a Redlock topology runs.
const NodeCount = 5

// DefaultDriftFactor is redis.io's clock drift allowance: 1% of the TTL,
// plus 2 ms for Redis's millisecond expiry (see Drift).
const DefaultDriftFactor = 0.01

// NodeName names the i-th node (0-based) as people count them: redlock-1 ..
// redlock-5, so that "nodes 1–3" in an article reads the same in a report.
func NodeName(i int) string { return "redlock-" + strconv.Itoa(i+1) }

// Nodes is the topology: NodeCount redis-server masters with no replication
// and no persistence, each under its own faked clock so that a fault can move
// one node's wall clock alone. Without persistence a restarted node comes
// back empty: that is the point of the restart faults.
func Nodes(program string) []backends.NodeSpec {
	specs := make([]backends.NodeSpec, NodeCount)
	for i := range specs {
		specs[i] = redis.Node(NodeName(i), program)
		specs[i].FakeClock = true
	}
	return specs
}

// Quorum is the number of nodes a lock must be won on: a strict majority.
func Quorum(nodes int) int { return nodes/2 + 1 }

// Drift is the clock drift allowance redis.io subtracts from the validity:
// TTL × factor plus 2 ms for Redis's millisecond expiry resolution.
func Drift(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + 2*time.Millisecond
}

// Validity is how long a lock won after elapsed stays the client's:
// TTL − elapsed − drift. It is negative when the round took too long.
func Validity(ttl, elapsed time.Duration, factor float64) time.Duration {
	return ttl - elapsed - Drift(ttl, factor)
}

// Won is the majority rule: the lock is the client's when a majority of the
// nodes granted it and some validity is left.
func Won(granted, nodes int, validity time.Duration) bool {
	return granted >= Quorum(nodes) && validity > 0
}

// Node is one master a client talks to.
type Node struct {
	Name string
	Addr string
}

// Options configure a client.
type Options struct {
	// Client: Fence asks for the backend's own fence, INCR on every node
	// and the highest reply, which is not safe (a restarted node counts
	// from zero, and a node that missed INCRs lags), as the fencing check
	// shows. Each command on one node is bounded by NodeTimeout, not
	// Timeout.
	backends.Client
	Nodes []Node
	// NodeTimeout bounds each command on one node; 0 means TTL/10. It must be
	// small against the TTL so that a dead or stopped node does not eat the
	// validity of the round.
	NodeTimeout time.Duration
	// DriftFactor is the clock drift allowance as a fraction of the TTL; 0
	// means DefaultDriftFactor.
	DriftFactor float64
	// Tries is how many rounds one Acquire may play; 0 means 1. lockcheck's
	// client loop retries by itself, so one round is one attempt in the
	// history.
	Tries int
	// RetryDelay is the upper bound of the random pause between rounds;
	// 0 means NodeTimeout.
	RetryDelay time.Duration
}

func (o Options) withDefaults() Options {
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = max(o.TTL/10, time.Millisecond)
	}
	if o.DriftFactor <= 0 {
		o.DriftFactor = DefaultDriftFactor
	}
	if o.Tries <= 0 {
		o.Tries = 1
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = o.NodeTimeout
	}
	return o
}

// Cluster holds one connection pool per node. Every call on it runs on all
// nodes in parallel, each bounded by the node timeout.
type Cluster struct {
	nodes   []Node
	clients []*goredis.Client
	timeout time.Duration
}

// Dial returns a cluster client; it connects lazily.
func Dial(nodes []Node, timeout time.Duration, source string) *Cluster {
	c := &Cluster{nodes: nodes, timeout: timeout}
	for _, n := range nodes {
		c.clients = append(c.clients, goredis.NewClient(&goredis.Options{
			Addr:        n.Addr,
			Dialer:      backends.Dialer(source, timeout),
			DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolTimeout: timeout,
			ContextTimeoutEnabled: true,
			// A retried SET NX could be applied twice; each command is sent
			// once and a lost reply counts as a node that did not grant.
			MaxRetries: -1,
			// go-redis dials five times with 100 ms pauses by default, which
			// would make a dead node cost 400 ms of validity.
			DialerRetries: 1,
			// After PoolSize failed dials in a row go-redis stops dialing and
			// probes once a second; a larger pool keeps a node that was down
			// briefly (a restart) reachable as soon as it is back.
			PoolSize: 32,
		}))
	}
	return c
}

// Clients are the per-node go-redis clients, in node order.
func (c *Cluster) Clients() []*goredis.Client { return c.clients }

// Close closes every pool.
func (c *Cluster) Close() error {
	var errs []error
	for _, rdb := range c.clients {
		errs = append(errs, rdb.Close())
	}
	return errors.Join(errs...)
}

// reply is one node's answer to a command sent to all.
type reply[T any] struct {
	val T
	err error
}

// each runs op on every node in parallel, each under the node timeout, and
// returns the replies in node order.
func each[T any](ctx context.Context, c *Cluster, op func(ctx context.Context, rdb *goredis.Client) (T, error)) []reply[T] {
	out := make([]reply[T], len(c.clients))
	done := make(chan int, len(c.clients))
	for i, rdb := range c.clients {
		go func() {
			nctx, cancel := context.WithTimeout(ctx, c.timeout)
			defer cancel()
			out[i].val, out[i].err = op(nctx, rdb)
			done <- i
		}()
	}
	for range c.clients {
		<-done
	}
	return out
}

// The release and extend scripts compare the token first, so a client whose
// lease expired cannot touch the lock of the client that holds it now.
var (
	releaseScript = goredis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)
	extendScript  = goredis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end`)
)

// Lock is a Redlock client.
type Lock struct {
	opts    Options
	cluster *Cluster
	rng     *rand.Rand
}

// New returns a client of the nodes in opts.
func New(opts Options) (*Lock, error) {
	if len(opts.Nodes) == 0 {
		return nil, errors.New("redlock needs at least one node")
	}
	if opts.TTL <= 0 {
		return nil, errors.New("redlock needs a positive TTL")
	}
	opts = opts.withDefaults()
	return &Lock{opts: opts, cluster: Dial(opts.Nodes, opts.NodeTimeout, opts.Source), rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}, nil
}

// Acquire plays up to Tries rounds. A round that is not won is released on
// every node, so the client holds nothing and will act on nothing: that is a
// certain refusal (ErrNotAcquired), even when a slow node applies the SET
// later (that key is then a stale one that expires by itself).
func (l *Lock) Acquire(ctx context.Context, key string) (backends.Grant, error) {
	token, err := NewToken()
	if err != nil {
		return backends.Grant{}, err
	}
	var lastErr error
	for try := 0; try < l.opts.Tries; try++ {
		if try > 0 {
			// A random pause, so that clients that split the nodes between
			// them do not split them again in lockstep.
			time.Sleep(time.Duration(l.rng.Int64N(int64(l.opts.RetryDelay) + 1)))
		}
		g, err := l.round(ctx, key, token)
		if !errors.Is(err, backends.ErrNotAcquired) {
			return g, err // granted, or granted with an unknown outcome: no second round
		}
		lastErr = err
	}
	return backends.Grant{}, lastErr
}

// round is one attempt of the algorithm.
func (l *Lock) round(ctx context.Context, key, token string) (backends.Grant, error) {
	start := time.Now()
	replies := each(ctx, l.cluster, func(ctx context.Context, rdb *goredis.Client) (bool, error) {
		return rdb.SetNX(ctx, key, token, l.opts.TTL).Result()
	})
	elapsed := time.Since(start)
	validity := Validity(l.opts.TTL, elapsed, l.opts.DriftFactor)
	var granted []string
	for i, r := range replies {
		if r.err == nil && r.val {
			granted = append(granted, l.opts.Nodes[i].Name)
		}
	}
	if !Won(len(granted), len(l.opts.Nodes), validity) {
		l.releaseAll(ctx, key, token)
		return backends.Grant{}, refusal(len(granted), len(l.opts.Nodes), elapsed, validity, replies)
	}
	g := backends.Grant{
		Token: token, TTL: l.opts.TTL, Nodes: granted,
		// start + elapsed + validity: the moment the lock stops being the
		// client's by Redlock's own arithmetic.
		Deadline: start.Add(elapsed + validity),
	}
	if l.opts.Fence {
		fence, err := IncrFence(ctx, l.cluster, key)
		if err != nil {
			return g, fmt.Errorf("lock taken but the fence could not be drawn: %w", err)
		}
		g.Fence = &fence
	}
	return g, nil
}

// refusal says why a round was lost, in one line.
func refusal(granted, nodes int, elapsed, validity time.Duration, replies []reply[bool]) error {
	if granted >= Quorum(nodes) {
		return fmt.Errorf("%w: %d of %d nodes granted it but the round took %s, leaving no validity (%s)",
			backends.ErrNotAcquired, granted, nodes, elapsed.Round(time.Millisecond), validity.Round(time.Millisecond))
	}
	failed := 0
	for _, r := range replies {
		if r.err != nil {
			failed++
		}
	}
	late := ""
	if failed > 0 {
		late = fmt.Sprintf(" (%d did not answer in time)", failed)
	}
	return fmt.Errorf("%w: %d of %d nodes granted it, %d needed%s", backends.ErrNotAcquired, granted, nodes, Quorum(nodes), late)
}

// FenceKey is the counter INCR draws fences from on each node.
func FenceKey(key string) string { return "lockcheck:fence:" + key }

// IncrFence is the INCR fence over a cluster: the highest of the counters a
// majority of the nodes returned. It rises as long as the node with the
// highest counter keeps it; a node that restarts empty or misses INCRs makes
// it repeat or go back.
func IncrFence(ctx context.Context, c *Cluster, key string) (int64, error) {
	replies := each(ctx, c, func(ctx context.Context, rdb *goredis.Client) (int64, error) {
		return rdb.Incr(ctx, FenceKey(key)).Result()
	})
	var (
		best     int64
		answered int
		errs     []string
	)
	for i, r := range replies {
		if r.err != nil {
			errs = append(errs, c.nodes[i].Name+": "+r.err.Error())
			continue
		}
		answered++
		best = max(best, r.val)
	}
	if answered < Quorum(len(replies)) {
		return 0, fmt.Errorf("INCR answered by %d of %d nodes (%s)", answered, len(replies), strings.Join(errs, "; "))
	}
	return best, nil
}

func (l *Lock) releaseAll(ctx context.Context, key, token string) []reply[int] {
	return each(ctx, l.cluster, func(ctx context.Context, rdb *goredis.Client) (int, error) {
		return releaseScript.Run(ctx, rdb, []string{key}, token).Int()
	})
}

// Release deletes the key on every node that still holds the token. It
// reports whether a majority of nodes deleted it. Nodes that did not answer
// keep a key that expires by itself; the outcome is unknown only when no
// majority answered at all.
func (l *Lock) Release(ctx context.Context, key string, g backends.Grant) (bool, error) {
	replies := l.releaseAll(ctx, key, g.Token)
	deleted, answered := 0, 0
	for _, r := range replies {
		if r.err == nil {
			answered++
			deleted += r.val
		}
	}
	if answered < Quorum(len(replies)) {
		return false, fmt.Errorf("release answered by %d of %d nodes", answered, len(replies))
	}
	return deleted >= Quorum(len(replies)), nil
}

// Extend pushes the key out to a full TTL on every node that still holds
// the token; it holds when a majority did so within the TTL.
func (l *Lock) Extend(ctx context.Context, key string, g backends.Grant) (bool, error) {
	start := time.Now()
	replies := each(ctx, l.cluster, func(ctx context.Context, rdb *goredis.Client) (int, error) {
		return extendScript.Run(ctx, rdb, []string{key}, g.Token, l.opts.TTL.Milliseconds()).Int()
	})
	extended := 0
	for _, r := range replies {
		if r.err == nil && r.val == 1 {
			extended++
		}
	}
	return Won(extended, len(replies), Validity(l.opts.TTL, time.Since(start), l.opts.DriftFactor)), nil
}

// Inspect describes the key on every node: free, or held with the time left.
func (l *Lock) Inspect(ctx context.Context, key string) (string, error) {
	return InspectCluster(ctx, l.cluster, key)
}

// InspectCluster describes key on every node of c, for the end-of-run
// evidence: "lock-0: redlock-1 free, redlock-2 held (312 ms left), ...".
func InspectCluster(ctx context.Context, c *Cluster, key string) (string, error) {
	replies := each(ctx, c, func(ctx context.Context, rdb *goredis.Client) (time.Duration, error) {
		return rdb.PTTL(ctx, key).Result()
	})
	parts := make([]string, len(replies))
	held, answered := 0, 0
	for i, r := range replies {
		name := c.nodes[i].Name
		switch {
		case r.err != nil:
			parts[i] = name + " did not answer"
			continue
		// go-redis reports PTTL's -2 (no key) and -1 (no expiry) as that
		// many nanoseconds.
		case r.val == -2*time.Nanosecond:
			parts[i] = name + " free"
		case r.val == -1*time.Nanosecond:
			parts[i] = name + " held with no TTL"
			held++
		default:
			parts[i] = fmt.Sprintf("%s held (%d ms left)", name, r.val.Milliseconds())
			held++
		}
		answered++
	}
	if answered == 0 {
		return "", errors.New("no node answered")
	}
	state := "free"
	if held >= Quorum(len(replies)) {
		state = "held on a majority"
	} else if held > 0 {
		state = "held on a minority (stale keys)"
	}
	return fmt.Sprintf("%s is %s: %s", key, state, strings.Join(parts, ", ")), nil
}

// Close closes the connection pools.
func (l *Lock) Close() error { return l.cluster.Close() }

// NewToken is a random owner token.
func NewToken() (string, error) {
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// Service is the Redlock topology's handle for the nemesis: it reads a
// node's wall clock with TIME, so a clock fault can record the offset it
// really made.
type Service struct {
	addrs map[string]string
}

// NewService returns the handle for the nodes at eps.
func NewService(eps []backends.Endpoint) *Service {
	c := &Service{addrs: map[string]string{}}
	for _, e := range eps {
		c.addrs[e.Name] = e.Addr()
	}
	return c
}

// WallClock reads node's wall clock with TIME.
func (c *Service) WallClock(ctx context.Context, node string) (time.Time, error) {
	addr, ok := c.addrs[node]
	if !ok {
		return time.Time{}, fmt.Errorf("no node %s", node)
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer rdb.Close()
	return rdb.Time(ctx).Result()
}

// Params of a Redlock run, as the CLI sets them in the run's params.
const (
	ParamNodeTimeout = "redlock-node-timeout" // a Go duration; per-node command timeout
	ParamDriftFactor = "redlock-drift-factor" // a fraction of the TTL
	ParamTries       = "redlock-tries"        // rounds per acquire
	ParamRetryDelay  = "redlock-retry-delay"  // upper bound of the random pause between rounds
)

// ParseParams reads the Redlock settings from a run's params into opts;
// absent params keep opts' values.
func ParseParams(params map[string]string, opts Options) (Options, error) {
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{ParamNodeTimeout, &opts.NodeTimeout}, {ParamRetryDelay, &opts.RetryDelay}} {
		if s := params[d.name]; s != "" {
			v, err := time.ParseDuration(s)
			if err != nil || v < 0 {
				return opts, fmt.Errorf("--%s %q: want a duration such as 50ms", d.name, s)
			}
			*d.dst = v
		}
	}
	if s := params[ParamDriftFactor]; s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v <= 0 || v >= 1 {
			return opts, fmt.Errorf("--%s %q: want a fraction of the TTL such as 0.01", ParamDriftFactor, s)
		}
		opts.DriftFactor = v
	}
	if s := params[ParamTries]; s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			return opts, fmt.Errorf("--%s %q: want a whole number of at least 1", ParamTries, s)
		}
		opts.Tries = v
	}
	return opts, nil
}

// NamedNodes pairs client addresses, in node order, with the node names.
func NamedNodes(addrs []string) []Node {
	nodes := make([]Node, len(addrs))
	for i, a := range addrs {
		nodes[i] = Node{Name: NodeName(i), Addr: a}
	}
	return nodes
}
