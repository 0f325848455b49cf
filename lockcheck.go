// Package lockcheck tests your own distributed lock the way the lockcheck
// command tests its built-in ones: real client processes (your code),
// real faults (SIGSTOP of the holder, a kill, a pause at a failpoint your
// lock declares), a recorded history and a checker that finds every window
// in which two clients believed they held the lock.
//
// A main package of your own registers your lock and hands the process to
// Main, which is the whole lockcheck command line (run, compare, scenario,
// check, serve) with your backend added:
//
//	func main() {
//		lockcheck.Register(lockcheck.Backend{Name: "mylock", Topology: "redis", Open: openMyLock})
//		lockcheck.Main()
//	}
//
//	go run . run --nemesis pause-holder   # your backend is the default
//
// Your Backend says two things of your lock that a run holds it to. Each
// Grant carries the lease the service promises (Grant.TTL), unless the
// lock holds a grant until it is released (a session lock:
// Backend.LeasesUntilRelease); a run stops at the first Grant with no TTL
// from a lock that does not say so. And Backend.Fences says that Acquire
// hands out a fence (Grant.Fence): a fenced run takes its fences from the
// lock unless told --fence-source resource, and is refused before it
// starts for a lock that hands out none.
//
// Clients run as worker processes that are your executable started again,
// so a pause of the holder stops your code where it stands. Register must
// therefore run on every start of the program (in main before Main, or in
// an init function), never behind a flag.
//
// Your program links the built-in backends whose servers lockcheck can
// start for your lock (Backend.Topology) and runs them as local processes.
// Two parts are left out, being by far the largest dependencies: the etcd
// backend (its members are lockcheck itself, so it links the etcd server)
// and the docker runtime (--runtime docker, a Docker client). Import them
// when your lock needs them; the lockcheck command has both:
//
//	import _ "github.com/lockcheck/lockcheck/backends/catalog/withetcd"
//	import _ "github.com/lockcheck/lockcheck/harness/container/withdocker"
package lockcheck

import (
	"context"
	"fmt"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/internal/cli"
)

// Lock is a client of your lock service, one per worker process. Acquire
// returns ErrNotAcquired (or an error wrapping it) when the service
// certainly refused the grant; any other error leaves the outcome unknown,
// and the checker treats the lock as possibly taken.
type Lock interface {
	Acquire(ctx context.Context, key string) (Grant, error)
	// Release gives the lock up and reports whether the service deleted
	// the client's hold.
	Release(ctx context.Context, key string, g Grant) (bool, error)
	Close() error
}

// Extender is a Lock whose lease can be pushed out while it is held; the
// workload's watchdog (--watchdog) uses it.
type Extender interface {
	// Extend pushes the lease out to a full TTL from now if g still holds
	// it, and reports false when the lease was no longer the client's.
	Extend(ctx context.Context, key string, g Grant) (bool, error)
}

// Inspector is a Lock that can describe the lock's state on the service;
// the run records it for every key once the clients stopped (a key left
// with no TTL is evidence).
type Inspector interface {
	Inspect(ctx context.Context, key string) (string, error)
}

// Cleaner is a Lock that can delete what a run left on a service lockcheck
// did not start (--addr): the run's keys, and whatever the lock keeps
// beside them. Without it they are left to expire.
type Cleaner interface {
	Clean(ctx context.Context, keys []string) error
}

// Grant is what a successful Acquire hands back: the token that identifies
// this hold, the lease length and, if the lock hands one out, the fence.
type Grant = backends.Grant

// ErrNotAcquired is the certain refusal of a grant: someone else holds the
// lock.
var ErrNotAcquired = backends.ErrNotAcquired

// ErrRefused is a certain refusal for another reason (the service would
// not write); an error that is ErrRefused is also ErrNotAcquired.
var ErrRefused = backends.ErrRefused

// Failpoint is called by your lock at named moments inside its own
// operations (between a GET and a DEL, say), so that a fault or a scenario
// can stop the client exactly there. Calling a nil Failpoint is allowed.
type Failpoint = backends.Failpoint

// Config is what a worker process opens your lock with.
type Config struct {
	// Variant is the variant the run chose (--variant); the first of
	// Backend.Variants unless the user picked another.
	Variant string
	// Addrs are the service's client addresses: the nodes lockcheck
	// started for Backend.Topology, or the ones given with --addr.
	Addrs []string
	// TTL is the lease the run asks for (--ttl).
	TTL time.Duration
	// Timeout bounds every operation (--op-timeout).
	Timeout time.Duration
	// Failpoint is where your lock reports its named moments; call
	// Failpoint.Hit("name") at each. Names must be declared in
	// Backend.Failpoints.
	Failpoint Failpoint
}

// Backend describes your lock to lockcheck.
type Backend struct {
	// Name is the --backend name of your lock.
	Name string
	// Variants are the versions of your lock a run can choose with
	// --variant; the first is the one that should be correct. None means
	// the single variant "default".
	Variants []string
	// Failpoints are the moments your lock declares, per variant, that
	// faults and scenarios may aim at (a scenario's `reaches:`).
	Failpoints map[string][]string
	// Topology names a built-in backend (redis, sentinel, redlock,
	// zookeeper, postgres; etcd with package withetcd imported) whose
	// servers lockcheck starts for your lock, node faults included.
	// Empty means none: run against a service you started (--addr) or a
	// lock that needs no server.
	Topology string
	// Open builds one client of your lock.
	Open func(Config) (Lock, error)
	// Fences says that your Acquire hands out a fence: Grant.Fence, a
	// number that rises with every grant. A fenced run (--workload fenced)
	// takes its fences from the lock unless told otherwise: with Fences
	// false, such a run is refused before it starts (use --fence-source
	// resource, the resource's own sequence, which works with every lock),
	// since the resource would refuse every write and the run would test
	// nothing. A lock that says nothing about fences hands out none.
	Fences bool
	// LeasesUntilRelease says that your lock holds a grant until it is
	// released (a session lock, whose lease ends with the client's
	// session): a Grant whose TTL is 0 is then a lease with no deadline.
	// Without it, Grant.TTL is the lease the service promises, and a run
	// stops at the first Grant whose TTL is 0, naming it: a client could
	// not tell for how long it holds the lock, and would skip every write.
	LeasesUntilRelease bool
}

// Register adds your backend to the command line Main runs; the first one
// registered is the default --backend. It panics on a backend that cannot
// work (no name, no Open, a name taken, an unknown topology): that is a
// programming error found on the first start.
func Register(b Backend) {
	if b.Name == "" || b.Open == nil {
		panic("lockcheck: Register needs a Name and an Open function")
	}
	variants := b.Variants
	if len(variants) == 0 {
		variants = []string{"default"}
	}
	entry := catalog.Backend{
		Name:       b.Name,
		Variants:   variants,
		Failpoints: b.Failpoints,
		Nodes:      func(catalog.Programs, map[string]string) []backends.NodeSpec { return nil },
		Open: func(s catalog.Spec, fp backends.Failpoint) (backends.Lock, error) {
			l, err := b.Open(Config{Variant: s.Variant, Addrs: s.Addrs, TTL: s.TTL, Timeout: s.Timeout, Failpoint: fp})
			if err != nil {
				return nil, err
			}
			if c, ok := l.(Cleaner); ok {
				return cleaningLock{fullLock{l}, c}, nil
			}
			return fullLock{l}, nil
		},
	}
	if b.Topology != "" {
		top, _, err := catalog.Lookup(b.Topology, "")
		if err != nil {
			panic(fmt.Sprintf("lockcheck: backend %s: topology: %v (the etcd topology needs import _ \"github.com/lockcheck/lockcheck/backends/catalog/withetcd\")", b.Name, err))
		}
		entry.Nodes, entry.ClientAddrs, entry.Ready, entry.Service = top.Nodes, top.ClientAddrs, top.Ready, top.Service
		entry.PrepareAddrs = top.PrepareAddrs
		entry.Programs, entry.Signature, entry.Diskless = top.Programs, top.Signature, top.Diskless
	}
	// What your lock says of itself, not what its topology's backend does.
	entry.LeasesUntilRelease = b.LeasesUntilRelease
	if b.Fences {
		entry.Fences = catalog.EveryVariant
	}
	catalog.Register(entry)
	if !registered {
		registered, catalog.DefaultBackend = true, b.Name
	}
}

// registered says whether Register ran: the first backend it registers is
// the default.
var registered bool

// Main runs the lockcheck command line with os.Args and the registered
// backends, and exits with its code: 0 the verdict is true, 1 it is false,
// 2 it is unknown or lockcheck could not run. In a worker process (your
// executable started again by a run) it runs the worker instead.
func Main() { cli.Main() }

// cleaningLock is a fullLock whose Lock is also a Cleaner.
type cleaningLock struct {
	fullLock
	Cleaner
}

// fullLock gives a user's Lock the optional methods lockcheck's clients
// call: an Extend that says the lock has none, an Inspect that says so.
type fullLock struct{ Lock }

func (l fullLock) Extend(ctx context.Context, key string, g Grant) (bool, error) {
	if e, ok := l.Lock.(Extender); ok {
		return e.Extend(ctx, key, g)
	}
	return false, fmt.Errorf("this lock cannot extend a lease (it implements no Extend)")
}

func (l fullLock) Inspect(ctx context.Context, key string) (string, error) {
	if i, ok := l.Lock.(Inspector); ok {
		return i.Inspect(ctx, key)
	}
	return key + ": not inspected (the lock implements no Inspect)", nil
}
