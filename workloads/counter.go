// Package workloads holds what a client does under the lock: the counter
// loop (acquire, read, think, check the lease, write read+1, release) over
// any backends.Lock, and the protected resource it writes (package
// resource). It links no backend: the worker process (harness/workerproc)
// opens the client from the catalog and hands it in.
package workloads

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads/resource"
)

// Fence sources (--fence-source).
const (
	FenceFromLock     = "lock"     // the backend's own fence (INCR for the Redis backends)
	FenceFromResource = "resource" // the resource's sequence, drawn after each grant
	FenceNone         = "none"
)

// Workload names.
const (
	Fenced   = "fenced"   // the resource refuses a write with a stale fence
	Unfenced = "unfenced" // every write lands
)

// ParamWatchdog is the run parameter that turns the watchdog on.
const ParamWatchdog = "watchdog"

// FailpointBeforeWrite is the moment after a client checked that its lease
// is still valid and before it writes: a pause here is the GC pause of every
// article on distributed locks, and no check in the client can catch it.
const FailpointBeforeWrite = "before-write"

// FailpointBeforeAcquire is the moment before a client asks for the lock. A
// client held here holds nothing, so holding every client here quiesces the
// lock service: the Sentinel lost-lock recipe needs a moment when the lock
// is free and every write is on the replicas.
const FailpointBeforeAcquire = "before-acquire"

// FailpointBeforeLeaseCheck is the moment after a client's work and before
// it checks its lease. A client held here is merely slow: it still skips its
// write if its lease ran out meanwhile.
const FailpointBeforeLeaseCheck = "before-lease-check"

// Config is one client's part of the workload.
type Config struct {
	// Process is the client's first process number; after an operation with
	// an unknown outcome it continues as Process+Stride, as in Jepsen.
	Process int
	Stride  int
	Keys    []string
	Think   Distribution
	// Retry is the pause after a refused acquire.
	Retry time.Duration
	// OpTimeout bounds each operation on the resource.
	OpTimeout time.Duration
	Seed      uint64
	// Watchdog extends the lease every TTL/3 while the client works, as
	// Redisson's watchdog does, from the client's own process: a pause of
	// the process freezes it too.
	Watchdog bool
	// FenceFromResource makes the client draw its fence from the resource's
	// own sequence right after each grant, instead of taking the backend's.
	FenceFromResource bool
	// LeasesUntilRelease says the lock holds a grant with no TTL until it
	// is released: such a grant has no deadline (LeaseError).
	LeasesUntilRelease bool
}

// Emit records one event of the client; the caller numbers it.
type Emit func(history.Event)

// Client runs the counter workload for one worker.
type Client struct {
	cfg      Config
	lock     backends.Lock
	res      resource.Resource
	emit     Emit
	fp       backends.Failpoint
	rng      *rand.Rand
	process  history.Process
	writeSeq int
	reports  reports
}

// NewClient returns a client. fp is hit at FailpointBeforeWrite.
func NewClient(cfg Config, lock backends.Lock, res resource.Resource, emit Emit, fp backends.Failpoint) *Client {
	if cfg.Stride <= 0 {
		cfg.Stride = 1
	}
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = time.Second
	}
	c := &Client{
		cfg: cfg, lock: lock, res: res, emit: emit, fp: fp,
		rng:     rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Process))),
		process: history.Process(cfg.Process),
	}
	if r, ok := lock.(backends.Reporter); ok {
		r.Reports(c.report)
	}
	return c
}

// Run loops until ctx is done, finishing the cycle in progress so that a
// held lock is released before it returns.
func (c *Client) Run(ctx context.Context) {
	for ctx.Err() == nil {
		key := c.cfg.Keys[c.rng.IntN(len(c.cfg.Keys))]
		granted := c.cycle(key)
		// A client that just released waits too, a random part of the
		// retry pause: otherwise it re-takes the lock before any waiting
		// client can, and the others starve.
		wait := c.cfg.Retry
		if granted && wait > 0 {
			wait = time.Duration(c.rng.Int64N(int64(wait))) + wait/2
		}
		sleep(ctx, wait)
	}
}

// cycle takes the lock once and, if granted, does the read-modify-write. It
// reports whether the lock was granted.
func (c *Client) cycle(key string) bool {
	c.fp.Hit(FailpointBeforeAcquire)
	ctx := context.Background() // an operation, once begun, runs to its own timeout
	c.startLock(ctx)
	start := c.invoke(history.FAcquire, key, nil)
	g, err := c.lock.Acquire(ctx, key)
	switch {
	case errors.Is(err, backends.ErrNotAcquired):
		var v *history.Value
		switch {
		case errors.Is(err, backends.ErrRefused):
			v = &history.Value{Refused: true}
		case errors.Is(err, backends.ErrNotSent):
			v = &history.Value{NotSent: true}
		}
		c.complete(history.Fail, history.FAcquire, key, v, err)
		return false
	case err != nil:
		c.retire(history.FAcquire, key, err)
		return false
	}
	margin := g.TTL/100 + 2*time.Millisecond // Redlock's clock drift allowance
	deadline, _ := history.LeaseEnds(start, start, g.TTL, margin)
	if !g.Deadline.IsZero() {
		// The backend computed the validity itself (Redlock); carry its
		// deadline over to CLOCK_MONOTONIC.
		deadline = history.Now() + int64(time.Until(g.Deadline))
	}
	if c.cfg.FenceFromResource {
		fence, err := c.nextFence(key)
		if err != nil {
			c.retire(history.FAcquire, key, fmt.Errorf("lock taken but the resource handed out no fence: %w", err))
			return false
		}
		g.Fence = &fence
	}
	if g.Lost != nil || (g.TTL <= 0 && c.cfg.LeasesUntilRelease) {
		// A lease renewed in the background, or held until released, has
		// no fixed deadline: the backend's watchdog ends the client's
		// belief, or the release does.
		deadline = 0
	}
	c.complete(history.OK, history.FAcquire, key, &history.Value{
		Token: g.Token, Fence: g.Fence, TTLms: g.TTL.Milliseconds(), Deadline: deadline, Nodes: g.Nodes,
		Session: g.Session, Via: g.Via,
	}, nil)
	if !c.readModifyWrite(key, g, deadline) {
		return true
	}
	rel := &history.Value{Token: g.Token}
	if leaseLost(g) {
		rel.Detail = LeaseLost
	}
	c.invoke(history.FRelease, key, rel)
	deleted, session, err := backends.Release(ctx, c.lock, key, g)
	if err != nil {
		c.retire(history.FRelease, key, err)
		return true
	}
	c.complete(history.OK, history.FRelease, key, &history.Value{Accepted: history.Bool(deleted), Session: session}, nil)
	return true
}

// nextFence draws the next number of the resource's strictly increasing
// sequence for key: the database-sequence fence, safe whatever the lock does.
func (c *Client) nextFence(key string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.OpTimeout)
	defer cancel()
	reply, err := c.res.NextFence(ctx, resource.FenceRequest{Key: key})
	return reply.Fence, err
}

// readModifyWrite reads the counter, thinks, and writes read+1 unless the
// lease ran out meanwhile. It reports false when the process was retired.
func (c *Client) readModifyWrite(key string, g backends.Grant, deadline int64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.OpTimeout)
	defer cancel()
	c.invoke(history.FRead, key, &history.Value{Fence: g.Fence})
	rr, err := c.res.Read(ctx, resource.ReadRequest{Key: key, Fence: g.Fence})
	if err != nil {
		c.retire(history.FRead, key, err)
		return false
	}
	c.complete(history.OK, history.FRead, key, &history.Value{Value: history.Int64(rr.Value)}, nil)

	if !c.work(key, g, &deadline) {
		return false
	}
	c.fp.Hit(FailpointBeforeLeaseCheck)
	if leaseLost(g) || (deadline != 0 && history.Now() >= deadline) {
		return true // the lease may be gone: skip the write, as a careful client does
	}
	c.fp.Hit(FailpointBeforeWrite)

	c.writeSeq++
	wr := resource.WriteRequest{
		Key: key, Process: c.process, Req: fmt.Sprintf("%d-%d", c.process, c.writeSeq),
		Fence: g.Fence, Read: rr.Value, Value: rr.Value + 1,
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), c.cfg.OpTimeout)
	defer cancel2()
	c.invoke(history.FWrite, key, &history.Value{Value: history.Int64(wr.Value), Read: history.Int64(wr.Read), Fence: wr.Fence, Req: wr.Req})
	reply, err := c.res.Write(ctx2, wr)
	if err != nil {
		c.retire(history.FWrite, key, err)
		return false
	}
	c.complete(history.OK, history.FWrite, key, &history.Value{Accepted: history.Bool(reply.Accepted), Prev: history.Int64(reply.Prev), Detail: reply.Reason}, nil)
	return true
}

// work spends the think time inside the lock. With the watchdog on, it
// extends the lease every TTL/3 meanwhile and pushes the deadline out with
// every extension that still found the lease the client's. It reports false
// when the process was retired.
func (c *Client) work(key string, g backends.Grant, deadline *int64) bool {
	end := time.Now().Add(c.cfg.Think.Draw(c.rng))
	every := g.TTL / 3
	if !c.cfg.Watchdog || every <= 0 {
		time.Sleep(time.Until(end))
		return true
	}
	margin := g.TTL/100 + 2*time.Millisecond
	for {
		if time.Until(end) < every {
			time.Sleep(time.Until(end))
			return true
		}
		time.Sleep(every)
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.OpTimeout)
		start := c.invoke(history.FExtend, key, &history.Value{Token: g.Token, TTLms: g.TTL.Milliseconds()})
		ok, err := c.lock.Extend(ctx, key, g)
		cancel()
		if err != nil {
			c.retire(history.FExtend, key, err)
			return false
		}
		c.complete(history.OK, history.FExtend, key, &history.Value{Accepted: history.Bool(ok), TTLms: g.TTL.Milliseconds()}, nil)
		if ok && *deadline != 0 {
			renewed, _ := history.LeaseEnds(start, start, g.TTL, margin)
			*deadline = max(*deadline, renewed)
		}
	}
}

// LeaseLost is the detail of a release invoked after the client noticed that
// its lease was gone (an etcd session whose keepalive failed).
const LeaseLost = "lease lost"

// leaseLost reports whether the backend noticed that g's lease is gone.
func leaseLost(g backends.Grant) bool {
	select {
	case <-g.Lost:
		return true
	default:
		return false
	}
}

func (c *Client) invoke(f, key string, v *history.Value) int64 {
	t := history.Now()
	c.emitEvent(history.Event{Time: t, Process: c.process, Type: history.Invoke, F: f, Key: key, Value: v})
	return t
}

func (c *Client) complete(t history.Type, f, key string, v *history.Value, err error) {
	e := history.Event{Time: history.Now(), Process: c.process, Type: t, F: f, Key: key, Value: v}
	if err != nil {
		e.Error = err.Error()
	}
	c.emitEvent(e)
}

// retire ends the process with an unknown outcome: its last operation may
// still take effect, so the worker goes on under a new process number.
func (c *Client) retire(f, key string, err error) {
	c.complete(history.Info, f, key, nil, err)
	c.process += history.Process(c.cfg.Stride)
}

// Process is the client's current process number.
func (c *Client) Process() history.Process { return c.process }

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// KeyNames returns the lock keys lock-0 .. lock-(n-1).
func KeyNames(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "lock-" + strconv.Itoa(i)
	}
	return keys
}
