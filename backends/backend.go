// Package backends defines what lockcheck needs of a lock backend: a client
// that acquires, extends and releases a lock and hands out a fence, the
// nodes the backend needs running, the server programs they run and the
// container image they run in under the docker runtime. Each backend is a
// package below this one and registers itself in package catalog. A backend
// knows nothing of faults.
package backends

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrNotAcquired means the lock service certainly refused the grant: the
// lock is held by someone else. It becomes a fail event, not an info.
var ErrNotAcquired = errors.New("lock is held by another client")

// ErrRefused means the lock service certainly did not execute the grant for
// a reason other than another client's hold (Redis's NOREPLICAS under
// min-replicas-to-write, READONLY). An error that is ErrRefused is also
// ErrNotAcquired; the fail event records it as refused.
var ErrRefused = errors.New("the lock service refused to write")

// ErrNotSent means the lock client itself refused the acquire and sent
// nothing to the service (it was not connected): the grant certainly did
// not happen, and the service was not asked. An error that is ErrNotSent is
// also ErrNotAcquired; the fail event records it as not sent, counted apart
// from the service's refusals.
var ErrNotSent = errors.New("the lock client sent nothing")

// Grant is what a successful acquire hands the client.
type Grant struct {
	Token string
	// Fence rises with every grant, if the backend hands out one.
	Fence *int64
	// TTL is the lease length the backend promises.
	TTL time.Duration
	// Deadline, if set, is the client's own validity deadline as the backend
	// computes it (Redlock: start + TTL − drift); the client loop honours it
	// before writing. Zero means the loop derives one from the TTL.
	Deadline time.Time
	// Nodes, for a lock won on several nodes, names the nodes that granted
	// it, so a report can tell which node's fault broke the lease.
	Nodes []string
	// Lost, if set, is closed once the client notices that the lease behind
	// the grant is gone. It is set by backends whose lease is renewed in the
	// background (an etcd session's keepalive): such a grant has no fixed
	// deadline, and this watchdog is what ends the client's belief.
	Lost <-chan struct{}
	// Session, if set, names the server session the lock is bound to
	// (PostgreSQL: node/backend pid): such a lock has no TTL, and its lease
	// ends when its holder releases it or the session ends.
	Session string
	// Via, if set, names the node the session's statements go through (a
	// pooler): its death closes the session and frees what it held.
	Via string
}

// Lock is a client of one lock service. Every error other than
// ErrNotAcquired leaves the outcome unknown.
type Lock interface {
	Acquire(ctx context.Context, key string) (Grant, error)
	// Extend pushes the lease out to a full TTL from now if g still holds it.
	// It reports false when the lease was no longer the client's.
	Extend(ctx context.Context, key string, g Grant) (bool, error)
	// Release gives the lock up. It reports whether a key was deleted.
	Release(ctx context.Context, key string, g Grant) (bool, error)
	// Inspect describes the lock's state on the service, for the evidence a
	// run records at its end (for example a key left with no TTL).
	Inspect(ctx context.Context, key string) (string, error)
	Close() error
}

// Client is what every lock client is told, whatever its backend; each
// backend's Options embeds it beside the settings of its own (addresses, a
// variant, Redlock's node timeout), and the catalog fills it from a run's
// spec in one place. A backend uses the fields that mean something to it:
// one with no failpoints never calls Failpoint, a session lock has no TTL.
type Client struct {
	// TTL is the lease asked for; a backend that rounds or clamps it
	// reports what it granted in Grant.TTL.
	TTL time.Duration
	// Fence asks for the backend's own fence with every grant (INCR for
	// Redis, a lock key's revision for etcd).
	Fence bool
	// Timeout bounds each operation; one that runs out has an unknown
	// outcome. 0 is the backend's default.
	Timeout time.Duration
	// Source, if set, is the loopback address the client's connections
	// come from: its own link in the process runtime's network, whose
	// proxies tell clients apart by it.
	Source string
	// Failpoint is hit at the named moments inside the backend's own
	// operations that a fault can aim at (nil: none).
	Failpoint Failpoint
}

// SessionLock is a Lock whose locks live on server sessions (a PostgreSQL
// advisory lock, MariaDB's GET_LOCK). Between the client and the server a
// pooler may run each statement on another session, and an unlock on a
// session that holds nothing frees nothing; so it names the session each
// release ran on and the one that holds a key, for the history's evidence.
type SessionLock interface {
	Lock
	// ReleaseOn is Release, also naming the server session the release
	// ran on ("" when it reached none).
	ReleaseOn(ctx context.Context, key string, g Grant) (released bool, session string, err error)
	// InspectHolder is Inspect, also naming the server session that holds
	// key ("" when none does).
	InspectHolder(ctx context.Context, key string) (desc, session string, err error)
}

// Release gives g's lock up with l, naming the server session the release
// ran on when l's locks live on sessions ("" otherwise).
func Release(ctx context.Context, l Lock, key string, g Grant) (released bool, session string, err error) {
	if s, ok := l.(SessionLock); ok {
		return s.ReleaseOn(ctx, key, g)
	}
	released, err = l.Release(ctx, key, g)
	return released, "", err
}

// Inspect describes key's state with l, naming the server session that
// holds it when l's locks live on sessions ("" otherwise).
func Inspect(ctx context.Context, l Lock, key string) (desc, session string, err error) {
	if s, ok := l.(SessionLock); ok {
		return s.InspectHolder(ctx, key)
	}
	desc, err = l.Inspect(ctx, key)
	return desc, "", err
}

// Cleaner is a Lock that can delete what runs left on a service lockcheck
// did not start (--addr): the lock keys and whatever it keeps beside them
// (a fence counter).
type Cleaner interface {
	Clean(ctx context.Context, keys []string) error
}

// Failpoint is called by a backend at named moments a fault may aim at, for
// example between SETNX and EXPIRE. A nil Failpoint does nothing.
type Failpoint func(name string)

// Hit calls fp if it is set.
func (fp Failpoint) Hit(name string) {
	if fp != nil {
		fp(name)
	}
}

// NodeSpec describes one server process a backend needs. The runtime picks
// its ports and directory, and starts it.
type NodeSpec struct {
	Name    string // redis-0, sentinel-1, etcd-2, ...
	Program string // the executable, looked up on PATH unless absolute
	// Ports is how many loopback ports the node listens on (at least 1);
	// the first serves clients.
	Ports int
	// Args builds the node's command line, knowing where every node of the
	// topology listens (a replica needs its master, a member its peers).
	Args func(self Endpoint, all []Endpoint) []string
	// Env is extra environment for the process.
	Env []string
	// Proxyable says the node can be reached through the process runtime's
	// proxies: it listens on Endpoint.ListenPort, tells others the address
	// they reach it at (Ports), and its own connections come from
	// Endpoint.Source or are named by Caller.
	Proxyable bool
	// Caller, if set, names the node of all that opened a connection to
	// this one, from the first bytes it sent, or says "": for nodes whose
	// own connections cannot come from an address of their choosing
	// (Endpoint.Source), as an etcd member's cannot, so that the process
	// runtime's proxies still know them as links.
	Caller func(all []Endpoint) func(head []byte) string
	// Rewrite, if set, rewrites the first bytes of a connection Caller
	// named, before they reach this node: for nodes whose peers name in
	// their first message the address they listen on themselves, which
	// this node would call back directly, past the proxies (a ZooKeeper
	// server's election address). It puts the address the peer is reached
	// at in its place.
	Rewrite func(all []Endpoint) func(head []byte) []byte
	// FakeClock starts the node under libfaketime so that a fault can move
	// its wall clock alone.
	FakeClock bool
	// DataPaths, relative to the node's directory, are removed by a restart
	// that wipes the node's data.
	DataPaths []string
	// WipedCopiesPeer says a node restarted without its data does not
	// start afresh when it has peers but copies the one that accepts
	// writes (a PostgreSQL standby's pg_basebackup). That peer itself,
	// wiped, has nothing to copy and never comes back, so a topology of
	// more than one such node offers no restart with its data wiped.
	WipedCopiesPeer bool
	// Ready returns nil once the node at addr serves requests.
	Ready func(ctx context.Context, addr string) error
	// ReadyWithin is how long the node may take to start serving (0: 15s);
	// a PostgreSQL node runs initdb first, which a busy machine makes slow.
	ReadyWithin time.Duration
	// Version asks a ready node for its version, for the report.
	Version func(ctx context.Context, addr string) (string, error)
	// Image is the container image the node runs in under the docker
	// runtime, and Command the program the container runs with Args;
	// Program is for local processes only.
	Image   *Image
	Command string
}

// Program is a server executable a backend's nodes run that lockcheck does
// not ship: lockcheck looks it up on PATH, a flag of its name (--Name)
// picks another, and a missing one is reported with how to install it.
type Program struct {
	Name string // redis-server: the executable's name and its flag
	// Package is the Debian package that installs it (scripts/setup does).
	Package string
	// Search, if set, is a glob where the package puts the program when
	// not on PATH (Debian's postgresql: /usr/lib/postgresql/*/bin); the
	// match sorting last by length, then name (the newest version), wins.
	Search string
	// Param, if set, is the run param without which the backend's
	// topology does not run the program (a part only some runs add, such
	// as a pooler in front of the server): preflight looks for it only in
	// a run that sets the param.
	Param string
}

// NeededBy says whether a run with params runs the program.
func (p Program) NeededBy(params map[string]string) bool {
	return p.Param == "" || params[p.Param] != ""
}

// Find is the executable for path, the program's name or the user's
// choice: path itself on PATH, else, for the plain name, what Search finds.
func (p Program) Find(path string) (string, error) {
	found, err := exec.LookPath(path)
	if err == nil {
		return found, nil
	}
	if path == p.Name && p.Search != "" {
		matches, _ := filepath.Glob(p.Search)
		slices.SortFunc(matches, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b)) })
		if len(matches) > 0 {
			return matches[len(matches)-1], nil
		}
	}
	return "", p.NotFound(path, err)
}

// NotFound is the error for a path of the program that is not there: how
// to install it, or which flag points at it.
func (p Program) NotFound(path string, err error) error {
	return fmt.Errorf("%s not found (%v): run scripts/setup (apt-get install %s) or pass its path with --%s", path, err, p.Package, p.Name)
}

// Image is a container image a backend's nodes run in under the docker
// runtime. lockcheck images build makes it from this machine's files with
// no registry and no base image; --<Kind>-image runs another.
type Image struct {
	Kind string // redis, etcd: the image's name in flags and params
	// Tag is the image lockcheck images build makes and runs use by default.
	Tag string
	// Runs says what runs in it, for run's --help; Contents what images
	// build puts into it, for its --help.
	Runs, Contents string
	// Port is the first port a node listens on inside its container (its
	// own network namespace, so always the conventional one); a node's
	// further ports follow it.
	Port int
	// Programs are host executables copied in under their names, with every
	// library they load.
	Programs []Program
	// Trees are host directories copied in whole at their own paths, for a
	// server that needs more than an executable (a JVM and its jars).
	Trees []Tree
	// Self, if set, copies the lockcheck executable in under this name:
	// a node that is lockcheck itself (an etcd member).
	Self string
	// Links are further names in the image: name -> program; a name is
	// in the image's PATH unless it is absolute (/bin/sh).
	Links map[string]string
	// Files are further files the image holds, by their path inside, with
	// their content: an /etc/passwd for a server that looks its user up.
	Files map[string]string
	// Entrypoint is the program the image runs by default.
	Entrypoint string
	// FakeClock puts libfaketime into the image, so that clock faults can
	// move the clock of a node in a container too.
	FakeClock bool
}

// Tree is a host directory an image holds. The symlinks on the way to it
// and in it are kept; a symlink in it to a file outside every tree of the
// image becomes a copy of that file. The executables and shared objects in
// it come with every library they load.
type Tree struct {
	Path string
	// Package is the Debian package that installs it.
	Package string
}

// Param is the run parameter (and the flag of run) that names the image
// a run uses: redis-image.
func (i *Image) Param() string { return i.Kind + "-image" }

// Endpoint is where a node of a running topology listens.
type Endpoint struct {
	Name string
	// Host is the address clients and other nodes reach the node at, Bind
	// the address it listens on. A local process has 127.0.0.1 for both; a
	// container has its address on the run's private network and listens
	// on every interface of its own network namespace (0.0.0.0).
	Host, Bind string
	Ports      []int
	Dir        string
	// Listen, if set, are the ports the node itself listens on, while
	// everyone reaches it at Ports, through the process runtime's proxies;
	// a node announces Ports as its own. Source, if set, is the address
	// its own connections must come from, which tells the proxies of the
	// other nodes who calls.
	Listen []int
	Source string
}

// ListenPort is the port the node's i-th port listens on itself.
func (e Endpoint) ListenPort(i int) int {
	if e.Listen != nil {
		return e.Listen[i]
	}
	return e.Ports[i]
}

// Dialer is a dial function whose connections come from the loopback
// address source, or from wherever the system picks when source is empty:
// a client's connections go through the process runtime's proxies as its
// own link.
func Dialer(source string, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if source != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(source)}
	}
	return d.DialContext
}

// Loopback is Host and Bind of a node that runs as a local process.
const Loopback = "127.0.0.1"

// HostName is where the node is reached, loopback unless a runtime said
// otherwise.
func (e Endpoint) HostName() string {
	if e.Host == "" {
		return Loopback
	}
	return e.Host
}

// BindAddr is the address the node listens on, loopback unless a runtime
// said otherwise.
func (e Endpoint) BindAddr() string {
	if e.Bind == "" {
		return Loopback
	}
	return e.Bind
}

// Addr is the node's client address.
func (e Endpoint) Addr() string { return e.AddrOf(0) }

// AddrOf is the address of the node's i-th port.
func (e Endpoint) AddrOf(i int) string {
	return net.JoinHostPort(e.HostName(), strconv.Itoa(e.Ports[i]))
}

// Addrs lists the client addresses of endpoints.
func Addrs(eps []Endpoint) []string {
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = e.Addr()
	}
	return out
}

// Starter is a Lock whose client must be running before a request can be
// sent to it: a lock client program, started again after it died or was
// killed. The client loop starts it before it records an operation's
// invoke, so that the time a restart takes is recorded as the restart it
// is (history.NemClientStart), never as the operation's latency, and no
// lease is judged from before its request could be sent.
type Starter interface {
	Lock
	// Start brings the client up if it is not running and says how long
	// that took: 0 when it was running.
	Start(ctx context.Context) (time.Duration, error)
}

// Reporter is a Lock whose library acts on its own between the operations
// it is asked for, and says so: a watchdog that renewed a lease, a session
// listener that noticed the lock is gone (a lock client program's renewed
// and lost messages). The client loop records each report in the history.
type Reporter interface {
	Lock
	// Reports sets the function each report is handed to; it is called
	// from the lock's own goroutine, never while an operation of the lock
	// waits for it.
	Reports(func(Report))
}

// Report is one thing a lock's library did on its own.
type Report struct {
	// Lost says the library noticed the lock on Key is no longer Token's
	// (Why says how); otherwise it renewed Token's lease on Key for TTL.
	Lost       bool
	Key, Token string
	TTL        time.Duration
	Why        string
	// At is when the lock said so.
	At time.Time
	// Rule, when set, says the library broke that rule of its protocol
	// (a lock client program's: docs/clients.md), and Why how; the lock
	// ends it. Key and Token are empty then. Such a report is the one
	// exception to Reports' rule: it comes while the operation the break
	// ends still waits, so that it is recorded under that operation's
	// process; the function must not call the lock.
	Rule string
	// Sent is, for a renewal, when the library sent it to the service
	// (CLOCK_MONOTONIC ns, the history's clock); 0 when it did not say.
	// Only a renewal known to have begun there can be an extend of the
	// holder: the service renewed the lease no earlier.
	Sent int64
}
