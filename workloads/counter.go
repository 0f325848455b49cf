// Package workloads holds what a client does under the lock: the counter
// loop (acquire, read, think, check the lease, write read+1, release) and the
// protected resource it writes.
package workloads

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads/resource"
)

// Workload names.
const (
	Fenced   = "fenced"   // the resource refuses a write with a stale fence
	Unfenced = "unfenced" // every write lands
)

// FailpointBeforeWrite is the moment after a client checked that its lease
// is still valid and before it writes: a pause here is the GC pause of every
// article on distributed locks, and no check in the client can catch it.
const FailpointBeforeWrite = "before-write"

// Config is one client's part of the workload.
type Config struct {
	// Process is the client's first process number; after an operation with
	// an unknown outcome it continues as Process+Stride, as in Jepsen.
	Process int
	Stride  int
	Keys    []string
	Think   Range
	// Retry is the pause after a refused acquire.
	Retry time.Duration
	// OpTimeout bounds each operation on the resource.
	OpTimeout time.Duration
	Seed      uint64
}

// Range is a duration drawn uniformly from [Min, Max].
type Range struct{ Min, Max time.Duration }

// ParseRange reads "20ms" or "10ms-50ms".
func ParseRange(s string) (Range, error) {
	lo, hi, found := strings.Cut(s, "-")
	min, err := time.ParseDuration(strings.TrimSpace(lo))
	if err != nil {
		return Range{}, fmt.Errorf("%q is not a duration or a range such as 10ms-50ms", s)
	}
	max := min
	if found {
		if max, err = time.ParseDuration(strings.TrimSpace(hi)); err != nil || max < min {
			return Range{}, fmt.Errorf("%q is not a duration or a range such as 10ms-50ms", s)
		}
	}
	if min < 0 {
		return Range{}, fmt.Errorf("%q: a duration cannot be negative", s)
	}
	return Range{min, max}, nil
}

func (r Range) String() string {
	if r.Min == r.Max {
		return r.Min.String()
	}
	return r.Min.String() + "-" + r.Max.String()
}

func (r Range) draw(rng *rand.Rand) time.Duration {
	if r.Max <= r.Min {
		return r.Min
	}
	return r.Min + time.Duration(rng.Int64N(int64(r.Max-r.Min)+1))
}

// Emit records one event of the client; the caller numbers it.
type Emit func(history.Event)

// Client runs the counter workload for one worker.
type Client struct {
	cfg      Config
	lock     backends.Lock
	res      *resource.Client
	emit     Emit
	fp       backends.Failpoint
	rng      *rand.Rand
	process  history.Process
	writeSeq int
}

// NewClient returns a client. fp is hit at FailpointBeforeWrite.
func NewClient(cfg Config, lock backends.Lock, res *resource.Client, emit Emit, fp backends.Failpoint) *Client {
	if cfg.Stride <= 0 {
		cfg.Stride = 1
	}
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = time.Second
	}
	return &Client{
		cfg: cfg, lock: lock, res: res, emit: emit, fp: fp,
		rng:     rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Process))),
		process: history.Process(cfg.Process),
	}
}

// Run loops until ctx is done, finishing the cycle in progress so that a
// held lock is released before it returns.
func (c *Client) Run(ctx context.Context) {
	for ctx.Err() == nil {
		key := c.cfg.Keys[c.rng.IntN(len(c.cfg.Keys))]
		if !c.cycle(key) {
			sleep(ctx, c.cfg.Retry)
		}
	}
}

// cycle takes the lock once and, if granted, does the read-modify-write. It
// reports whether the lock was granted.
func (c *Client) cycle(key string) bool {
	ctx := context.Background() // an operation, once begun, runs to its own timeout
	start := c.invoke(history.FAcquire, key, nil)
	g, err := c.lock.Acquire(ctx, key)
	switch {
	case errors.Is(err, backends.ErrNotAcquired):
		c.complete(history.Fail, history.FAcquire, key, nil, err)
		return false
	case err != nil:
		c.retire(history.FAcquire, key, err)
		return false
	}
	margin := g.TTL/100 + 2*time.Millisecond // Redlock's clock drift allowance
	deadline := start + int64(g.TTL-margin)
	c.complete(history.OK, history.FAcquire, key, &history.Value{
		Token: g.Token, Fence: g.Fence, TTLms: g.TTL.Milliseconds(), Deadline: deadline,
	}, nil)
	if !c.readModifyWrite(key, g, deadline) {
		return true
	}
	c.invoke(history.FRelease, key, &history.Value{Token: g.Token})
	deleted, err := c.lock.Release(ctx, key, g)
	if err != nil {
		c.retire(history.FRelease, key, err)
		return true
	}
	c.complete(history.OK, history.FRelease, key, &history.Value{Accepted: history.Bool(deleted)}, nil)
	return true
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

	time.Sleep(c.cfg.Think.draw(c.rng))
	if history.Now() >= deadline {
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

func (c *Client) invoke(f, key string, v *history.Value) int64 {
	t := history.Now()
	c.emit(history.Event{Time: t, Process: c.process, Type: history.Invoke, F: f, Key: key, Value: v})
	return t
}

func (c *Client) complete(t history.Type, f, key string, v *history.Value, err error) {
	e := history.Event{Time: history.Now(), Process: c.process, Type: t, F: f, Key: key, Value: v}
	if err != nil {
		e.Error = err.Error()
	}
	c.emit(e)
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
