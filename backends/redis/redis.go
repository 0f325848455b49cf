// Package redis is the single-Redis lock backend: SET key token NX PX with a
// token-checked Lua release, and the known-bad variants people still ship.
package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/history"
)

// Variants of the Redis lock.
const (
	// Correct is SET key token NX PX ttl, released by a Lua compare-and-delete.
	Correct = "correct"
	// SetnxExpire takes the lock with SETNX and then EXPIRE: a client that
	// dies between the two leaves a key that never expires.
	SetnxExpire = "setnx-expire"
	// DelRelease releases with a plain DEL, deleting whoever holds the lock.
	DelRelease = "del-release"
)

// Variants lists every variant, the correct one first.
var Variants = []string{Correct, SetnxExpire, DelRelease}

// FailpointSetnxExpireGap is the moment between SETNX and EXPIRE.
const FailpointSetnxExpireGap = "setnx-expire-gap"

// The release and extend scripts compare the token first, so a client whose
// lease expired cannot touch the lock of the client that holds it now.
var (
	releaseScript = goredis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)
	extendScript  = goredis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end`)
)

// Options configure a client.
type Options struct {
	// Client: Fence takes a fence from INCR on a counter key; a command
	// that runs out of Timeout has an unknown outcome.
	backends.Client
	Addr    string
	Variant string
}

// Lock is a Redis lock client.
type Lock struct {
	opts Options
	rdb  *goredis.Client
}

// New returns a client of the Redis at opts.Addr.
func New(opts Options) (*Lock, error) {
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	return NewWithClient(opts, goredis.NewClient(&goredis.Options{
		Addr:         opts.Addr,
		Dialer:       backends.Dialer(opts.Source, opts.Timeout),
		DialTimeout:  opts.Timeout,
		ReadTimeout:  opts.Timeout,
		WriteTimeout: opts.Timeout,
		// A retried SET NX could succeed the first time and fail the second:
		// every command is sent once and a lost reply is an unknown outcome.
		MaxRetries: -1,
		PoolSize:   2,
	}))
}

// NewWithClient returns a lock that sends its commands through rdb, for
// backends that find their Redis another way (through Sentinel). rdb must
// never retry a command on its own (MaxRetries -1); opts.Addr is not used.
// The lock closes rdb when it is closed, also when NewWithClient fails.
func NewWithClient(opts Options, rdb *goredis.Client) (*Lock, error) {
	if opts.Variant == "" {
		opts.Variant = Correct
	}
	if !validVariant(opts.Variant) {
		rdb.Close()
		return nil, fmt.Errorf("unknown redis variant %q (want one of %v)", opts.Variant, Variants)
	}
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	return &Lock{opts: opts, rdb: rdb}, nil
}

// Refused is a write the Redis server certainly did not execute, for a
// reason other than another client's hold: NOREPLICAS (min-replicas-to-write
// is not met), READONLY (the node is a replica now), or no connection could
// be made at all (a killed master), so the command was never sent. It counts
// as backends.ErrNotAcquired, and its text starts with history.RefusedPrefix
// so that the checker can count such refusals apart from a busy lock.
type Refused struct{ Reply string }

func (r Refused) Error() string { return history.RefusedPrefix + r.Reply }

// Is makes a refusal a certain failure to acquire, and a refusal.
func (r Refused) Is(target error) bool {
	return target == backends.ErrNotAcquired || target == backends.ErrRefused
}

// refusal turns the errors that mean a write was never executed into
// Refused; any other error (a timeout, a connection lost after the command
// was sent) leaves the outcome unknown and is returned as it is.
func refusal(err error) error {
	var dial *net.OpError
	if errors.As(err, &dial) && dial.Op == "dial" {
		return Refused{Reply: "cannot connect: " + err.Error()}
	}
	var reply goredis.Error
	if errors.As(err, &reply) {
		for _, prefix := range []string{"NOREPLICAS", "READONLY"} {
			if strings.HasPrefix(reply.Error(), prefix) {
				return Refused{Reply: reply.Error()}
			}
		}
	}
	return err
}

func validVariant(v string) bool {
	for _, x := range Variants {
		if x == v {
			return true
		}
	}
	return false
}

// FenceKey is the counter INCR draws fences from.
func FenceKey(key string) string { return "lockcheck:fence:" + key }

// Acquire takes the lock once, without retrying.
func (l *Lock) Acquire(ctx context.Context, key string) (backends.Grant, error) {
	token, err := newToken()
	if err != nil {
		return backends.Grant{}, err
	}
	g := backends.Grant{Token: token, TTL: l.opts.TTL}
	switch l.opts.Variant {
	case SetnxExpire:
		ok, err := l.rdb.SetNX(ctx, key, token, 0).Result()
		if err != nil {
			return g, refusal(err)
		}
		if !ok {
			return g, backends.ErrNotAcquired
		}
		l.opts.Failpoint.Hit(FailpointSetnxExpireGap)
		if err := l.rdb.PExpire(ctx, key, l.opts.TTL).Err(); err != nil {
			return g, err
		}
	default:
		ok, err := l.rdb.SetNX(ctx, key, token, l.opts.TTL).Result()
		if err != nil {
			return g, refusal(err)
		}
		if !ok {
			return g, backends.ErrNotAcquired
		}
	}
	if l.opts.Fence {
		n, err := l.rdb.Incr(ctx, FenceKey(key)).Result()
		if err != nil {
			return g, fmt.Errorf("lock taken but INCR of the fence failed: %w", err)
		}
		g.Fence = &n
	}
	return g, nil
}

// Extend pushes the lease out by a full TTL if the token still holds it.
func (l *Lock) Extend(ctx context.Context, key string, g backends.Grant) (bool, error) {
	n, err := extendScript.Run(ctx, l.rdb, []string{key}, g.Token, l.opts.TTL.Milliseconds()).Int()
	return n == 1, err
}

// Release deletes the lock: with a token check, or blindly for del-release.
func (l *Lock) Release(ctx context.Context, key string, g backends.Grant) (bool, error) {
	if l.opts.Variant == DelRelease {
		n, err := l.rdb.Del(ctx, key).Result()
		return n == 1, err
	}
	n, err := releaseScript.Run(ctx, l.rdb, []string{key}, g.Token).Int()
	return n == 1, err
}

// Inspect describes the key: free, or held with its remaining TTL.
func (l *Lock) Inspect(ctx context.Context, key string) (string, error) {
	pttl, err := l.rdb.PTTL(ctx, key).Result()
	if err != nil {
		return "", err
	}
	// go-redis reports PTTL's -1 (no expiry) and -2 (no key) as those many
	// nanoseconds rather than milliseconds.
	switch pttl {
	case -2 * time.Nanosecond:
		return key + " is free", nil
	case -1 * time.Nanosecond:
		return key + " is held with no TTL (PTTL -1): it will never expire", nil
	}
	return fmt.Sprintf("%s is held with %d ms left", key, pttl.Milliseconds()), nil
}

// leaseScript reads a key's PTTL and value at one moment.
var leaseScript = goredis.NewScript(`return {redis.call("pttl", KEYS[1]), redis.call("get", KEYS[1])}`)

// Lease reads what the server holds for key at one moment: whether it
// exists, its value and how long it lives on (negative: no expiry). client
// check holds a program's claimed leases to it.
func (l *Lock) Lease(ctx context.Context, key string) (held bool, value string, left time.Duration, err error) {
	r, err := leaseScript.Run(ctx, l.rdb, []string{key}).Slice()
	if err != nil || len(r) == 0 {
		return false, "", 0, err
	}
	pttl, _ := r[0].(int64)
	switch pttl {
	case -2:
		return false, "", 0, nil
	case -1:
		left = -1
	default:
		left = time.Duration(pttl) * time.Millisecond
	}
	if len(r) > 1 {
		value, _ = r[1].(string)
	}
	return true, value, left, nil
}

// Close closes the connection pool.
func (l *Lock) Close() error { return l.rdb.Close() }

func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// Server is the program every Redis node runs.
var Server = backends.Program{Name: "redis-server", Package: "redis-server"}

// Image is the container image of Redis nodes: the installed redis-server,
// which also runs as redis-sentinel, and libfaketime for clock faults.
var Image = &backends.Image{
	Kind: "redis", Tag: "lockcheck/redis:local", Port: 6379,
	Runs:       "Redis nodes (redis-server on PATH; libfaketime for clock faults)",
	Contents:   "the installed redis-server (also run as redis-sentinel), the libraries ldd lists for it, and libfaketime for clock faults",
	Programs:   []backends.Program{Server},
	Links:      map[string]string{"redis-sentinel": Server.Name},
	Entrypoint: Server.Name,
	FakeClock:  true,
}

// Node describes a redis-server process: loopback only, no persistence,
// logs and data in its own directory.
func Node(name, program string) backends.NodeSpec {
	if program == "" {
		program = Server.Name
	}
	return backends.NodeSpec{
		Name:    name,
		Program: program,
		Ports:   1,
		Args: func(self backends.Endpoint, _ []backends.Endpoint) []string {
			return append([]string{
				"--bind", self.BindAddr(),
				"--port", strconv.Itoa(self.ListenPort(0)),
				"--dir", self.Dir,
				"--logfile", "redis.log",
				"--save", "",
				"--appendonly", "no",
				"--daemonize", "no",
				// Protected mode refuses everyone but loopback; a node in a
				// container is reached over the run's private network.
				"--protected-mode", ProtectedMode(self),
			}, Proxied(self)...)
		},
		Ready:     ping,
		Version:   version,
		Image:     Image,
		Command:   Server.Name,
		Proxyable: true,
	}
}

// Proxied are the settings of a node others reach through the process
// runtime's proxies, none otherwise: its replication and sentinel links
// come from its own address (Endpoint.Source), so that the proxies know
// them as its links, and as a replica it announces the address everyone
// reaches it at, so that its master and the sentinels name that one.
func Proxied(self backends.Endpoint) []string {
	if self.Source == "" {
		return nil
	}
	return []string{
		"--bind-source-addr", self.Source,
		"--replica-announce-ip", self.HostName(),
		"--replica-announce-port", strconv.Itoa(self.Ports[0]),
	}
}

// ProtectedMode is yes for a node on loopback, no for one on a private
// container network (which protects it instead).
func ProtectedMode(self backends.Endpoint) string {
	if self.BindAddr() == backends.Loopback {
		return "yes"
	}
	return "no"
}

func ping(ctx context.Context, addr string) error {
	rdb := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	return rdb.Ping(ctx).Err()
}

func version(ctx context.Context, addr string) (string, error) {
	rdb := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	info, err := rdb.InfoMap(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	if v, ok := info["Server"]["redis_version"]; ok {
		return v, nil
	}
	return "", errors.New("INFO server has no redis_version")
}
