package checker

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"testing"

	"github.com/lockcheck/lockcheck/history"
	"github.com/stretchr/testify/require"
)

// t0 is where hand-written histories start on CLOCK_MONOTONIC.
const t0 = int64(1e9)

// at turns milliseconds since the start of a hand-written history into a
// CLOCK_MONOTONIC time.
func at(ms float64) int64 { return t0 + int64(ms*1e6) }

// builder writes histories by hand: each call adds an operation's invoke and
// completion, times in milliseconds since t0. Build orders the events by
// time and numbers them, so operations of different processes can be added
// in any order.
type builder struct {
	cfg    history.RunConfig
	events []history.Event
}

const lockKey = "lock-0"

func newBuilder(workload string) *builder {
	return &builder{cfg: history.RunConfig{Backend: "redis", Workload: workload, Clients: 3, Keys: 1, TTLms: 100}}
}

func (b *builder) add(ms float64, p history.Process, typ history.Type, f string, v *history.Value) *builder {
	key := lockKey
	if p == history.Nemesis {
		key = ""
	}
	b.events = append(b.events, history.Event{Time: at(ms), Process: p, Type: typ, F: f, Key: key, Value: v})
	return b
}

// op adds an invoke at inv and a completion of type done at end.
func (b *builder) op(p history.Process, f string, inv float64, invValue *history.Value, end float64, done history.Type, doneValue *history.Value) *builder {
	b.add(inv, p, history.Invoke, f, invValue)
	return b.add(end, p, done, f, doneValue)
}

// acquire adds a granted acquire with a 100 ms TTL; fence < 0 means none.
func (b *builder) acquire(p history.Process, inv, ok float64, fence int64) *builder {
	v := &history.Value{Token: p.String(), TTLms: 100}
	if fence >= 0 {
		v.Fence = history.Int64(fence)
	}
	return b.op(p, history.FAcquire, inv, nil, ok, history.OK, v)
}

func (b *builder) acquireFail(p history.Process, inv, end float64) *builder {
	return b.op(p, history.FAcquire, inv, nil, end, history.Fail, nil)
}

func (b *builder) release(p history.Process, inv, end float64) *builder {
	return b.op(p, history.FRelease, inv, &history.Value{Token: p.String()}, end, history.OK, nil)
}

func (b *builder) extend(p history.Process, inv, end float64, ttlMs int64) *builder {
	return b.op(p, history.FExtend, inv, &history.Value{TTLms: ttlMs}, end, history.OK, &history.Value{TTLms: ttlMs})
}

func (b *builder) read(p history.Process, inv, end float64, value int64) *builder {
	return b.op(p, history.FRead, inv, nil, end, history.OK, &history.Value{Value: history.Int64(value)})
}

// write adds a write of value computed from read, carrying fence (< 0: none)
// and request id req, completed with done; prev is the resource's value
// before it, as write ok reports.
func (b *builder) write(p history.Process, inv, end float64, value, read, fence int64, req string, done history.Type, accepted bool, prev int64) *builder {
	v := &history.Value{Value: history.Int64(value), Read: history.Int64(read), Req: req}
	if fence >= 0 {
		v.Fence = history.Int64(fence)
	}
	var dv *history.Value
	if done == history.OK {
		dv = &history.Value{Accepted: history.Bool(accepted), Prev: history.Int64(prev)}
	}
	return b.op(p, history.FWrite, inv, v, end, done, dv)
}

// rmw adds a read of read and an accepted write of read+1 over prev.
func (b *builder) rmw(p history.Process, inv, end float64, read, prev, fence int64, req string) *builder {
	mid := (inv + end) / 2
	b.read(p, inv, mid, read)
	return b.write(p, mid, end, read+1, read, fence, req, history.OK, true, prev)
}

// cycle adds a whole turn of a well-behaved client: acquire, read, write,
// release, starting at ms and lasting 10 ms.
func (b *builder) cycle(p history.Process, ms float64, value, fence int64, req string) *builder {
	b.acquire(p, ms, ms+1, fence)
	b.rmw(p, ms+2, ms+6, value, value, fence, req)
	return b.release(p, ms+8, ms+9)
}

func (b *builder) nemesis(ms float64, f, target, failpoint, detail string) *builder {
	return b.add(ms, history.Nemesis, history.Info, f, &history.Value{Target: target, Failpoint: failpoint, Detail: detail})
}

// build orders and numbers the events and round-trips them through the
// history format, so every hand-written history is also a valid file.
func (b *builder) build(t testing.TB) *history.History {
	t.Helper()
	events := slices.Clone(b.events)
	slices.SortStableFunc(events, func(x, y history.Event) int { return cmp.Compare(x.Time, y.Time) })
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	require.NoError(t, enc.Encode(history.Header{Version: history.SchemaVersion, StartTime: t0, Config: b.cfg}))
	for i, e := range events {
		e.Index = int64(i)
		require.NoError(t, enc.Encode(e))
	}
	h, err := history.Read(&buf)
	require.NoError(t, err)
	return h
}

// check builds and checks the history with no resource log.
func (b *builder) check(t testing.TB) *Result {
	t.Helper()
	return Check(b.build(t), nil, Options{})
}
