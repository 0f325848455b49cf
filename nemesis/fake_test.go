package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/lockcheck/lockcheck/history"
)

// fakeTarget is a process that only notes the signals it gets; failWith
// makes every signal fail.
type fakeTarget struct {
	name     string
	failWith error

	mu      sync.Mutex
	pid     int
	signals []syscall.Signal
}

func (f *fakeTarget) Name() string { return f.name }

func (f *fakeTarget) PID() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pid
}

func (f *fakeTarget) Signal(sig syscall.Signal) error {
	if f.failWith != nil {
		return f.failWith
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.signals = append(f.signals, sig)
	return nil
}

func (f *fakeTarget) got() []syscall.Signal {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]syscall.Signal(nil), f.signals...)
}

// fakeNode is a node that restarts after restartTakes (as slow as the
// machine under test) and has a clock.
type fakeNode struct {
	fakeTarget
	restartTakes time.Duration
	restartErr   error
	onRestart    func()

	offset   time.Duration
	restarts int
}

func (n *fakeNode) Restart(ctx context.Context, wipe bool) error {
	select {
	case <-time.After(n.restartTakes):
	case <-ctx.Done():
		return ctx.Err()
	}
	if n.restartErr != nil {
		return n.restartErr
	}
	n.mu.Lock()
	n.pid++
	n.restarts++
	n.mu.Unlock()
	if n.onRestart != nil {
		n.onRestart()
	}
	return nil
}

func (n *fakeNode) SetClock(offset time.Duration) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.offset = offset
	return nil
}

func (n *fakeNode) Clock() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.offset
}

// fakeClient parks at once wherever it is asked to.
type fakeClient struct {
	fakeTarget
	parked []string
	missAt string // a failpoint it never reaches
}

func (c *fakeClient) ParkAt(ctx context.Context, failpoint string) (func(), error) {
	if failpoint == c.missAt {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	c.mu.Lock()
	c.parked = append(c.parked, failpoint)
	c.mu.Unlock()
	return func() {}, nil
}

// fakeTargets is a running test with fake nodes and clients. holders says
// who holds the lock now.
type fakeTargets struct {
	nodes   []Target
	clients []Client
	service any
	holders func() []Client
}

func (f *fakeTargets) Holder() (Client, bool) {
	if h := f.holders(); len(h) > 0 {
		return h[0], true
	}
	return nil, false
}
func (f *fakeTargets) Holders() []Client { return f.holders() }
func (f *fakeTargets) Clients() []Client { return f.clients }
func (f *fakeTargets) Nodes() []Target   { return f.nodes }
func (f *fakeTargets) Service() any      { return f.service }
func (f *fakeTargets) Lookup(name string) (Target, bool) {
	for _, n := range f.nodes {
		if n.Name() == name {
			return n, true
		}
	}
	for _, c := range f.clients {
		if c.Name() == name {
			return c, true
		}
	}
	return nil, false
}

// recorder keeps the events faults record.
type recorder struct {
	mu     sync.Mutex
	events []history.Value
	verbs  []string
}

func (r *recorder) record(f string, v history.Value) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.verbs = append(r.verbs, f)
	r.events = append(r.events, v)
}

func (r *recorder) list() ([]string, []history.Value) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.verbs...), append([]history.Value(nil), r.events...)
}

func newNodes(n int, restartTakes time.Duration) []*fakeNode {
	nodes := make([]*fakeNode, n)
	for i := range nodes {
		nodes[i] = &fakeNode{fakeTarget: fakeTarget{name: fmt.Sprintf("redis-%d", i), pid: 100 * (i + 1)}, restartTakes: restartTakes}
	}
	return nodes
}

func newClients(n int) []*fakeClient {
	cs := make([]*fakeClient, n)
	for i := range cs {
		cs[i] = &fakeClient{fakeTarget: fakeTarget{name: fmt.Sprintf("c%d", i), pid: 1000 + i}}
	}
	return cs
}

var errSignal = errors.New("operation not permitted")
