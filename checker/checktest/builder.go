// Package checktest writes lockcheck histories for tests of the checker and
// of every later check: a builder for hand-written histories and a
// generator of small random ones.
package checktest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"

	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/history"
)

// T0 is where hand-written histories start on CLOCK_MONOTONIC.
const T0 = int64(1e9)

// At turns milliseconds since the start of a hand-written history into a
// CLOCK_MONOTONIC time.
func At(ms float64) int64 { return T0 + int64(ms*1e6) }

// LockKey is the key every operation of a Builder names.
const LockKey = "lock-0"

// Builder writes histories by hand: each call adds an operation's invoke and
// completion, times in milliseconds since T0. Build orders the events by
// time and numbers them, so operations of different processes can be added
// in any order.
type Builder struct {
	Config history.RunConfig
	// Head, if set, makes the history a later segment of a soak.
	Head   *history.SegmentHead
	Events []history.Event
}

// NewBuilder starts a history of three clients on one key with a 100 ms TTL;
// workload is "fenced" or "unfenced".
func NewBuilder(workload string) *Builder {
	return &Builder{Config: history.RunConfig{Backend: "redis", Workload: workload, Clients: 3, Keys: 1, TTLms: 100}}
}

// Add adds one event at ms; client events name LockKey.
func (b *Builder) Add(ms float64, p history.Process, typ history.Type, f string, v *history.Value) *Builder {
	key := LockKey
	if p == history.Nemesis {
		key = ""
	}
	b.Events = append(b.Events, history.Event{Time: At(ms), Process: p, Type: typ, F: f, Key: key, Value: v})
	return b
}

// Op adds an invoke at inv and a completion of type done at end.
func (b *Builder) Op(p history.Process, f string, inv float64, invValue *history.Value, end float64, done history.Type, doneValue *history.Value) *Builder {
	b.Add(inv, p, history.Invoke, f, invValue)
	return b.Add(end, p, done, f, doneValue)
}

// Acquire adds a granted acquire with a 100 ms TTL; fence < 0 means none.
func (b *Builder) Acquire(p history.Process, inv, ok float64, fence int64) *Builder {
	v := &history.Value{Token: p.String(), TTLms: 100}
	if fence >= 0 {
		v.Fence = history.Int64(fence)
	}
	return b.Op(p, history.FAcquire, inv, nil, ok, history.OK, v)
}

// AcquireOn adds a multi-node (Redlock) grant won on nodes, with a 100 ms
// TTL.
func (b *Builder) AcquireOn(p history.Process, inv, ok float64, nodes ...string) *Builder {
	return b.Op(p, history.FAcquire, inv, nil, ok, history.OK, &history.Value{Token: p.String(), TTLms: 100, Nodes: nodes})
}

// AcquireFail adds an acquire that found the lock busy.
func (b *Builder) AcquireFail(p history.Process, inv, end float64) *Builder {
	return b.Op(p, history.FAcquire, inv, nil, end, history.Fail, nil)
}

// Release adds a release that deleted the key.
func (b *Builder) Release(p history.Process, inv, end float64) *Builder {
	return b.Op(p, history.FRelease, inv, &history.Value{Token: p.String()}, end, history.OK, nil)
}

// Extend adds an accepted extend to ttlMs.
func (b *Builder) Extend(p history.Process, inv, end float64, ttlMs int64) *Builder {
	return b.Op(p, history.FExtend, inv, &history.Value{TTLms: ttlMs}, end, history.OK, &history.Value{TTLms: ttlMs})
}

// Read adds a read that returned value.
func (b *Builder) Read(p history.Process, inv, end float64, value int64) *Builder {
	return b.Op(p, history.FRead, inv, nil, end, history.OK, &history.Value{Value: history.Int64(value)})
}

// Write adds a write of value computed from read, carrying fence (< 0: none)
// and request id req, completed with done; prev is the resource's value
// before it, as write ok reports.
func (b *Builder) Write(p history.Process, inv, end float64, value, read, fence int64, req string, done history.Type, accepted bool, prev int64) *Builder {
	v := &history.Value{Value: history.Int64(value), Read: history.Int64(read), Req: req}
	if fence >= 0 {
		v.Fence = history.Int64(fence)
	}
	var dv *history.Value
	if done == history.OK {
		dv = &history.Value{Accepted: history.Bool(accepted), Prev: history.Int64(prev)}
	}
	return b.Op(p, history.FWrite, inv, v, end, done, dv)
}

// RMW adds a read of read and an accepted write of read+1 over prev.
func (b *Builder) RMW(p history.Process, inv, end float64, read, prev, fence int64, req string) *Builder {
	mid := (inv + end) / 2
	b.Read(p, inv, mid, read)
	return b.Write(p, mid, end, read+1, read, fence, req, history.OK, true, prev)
}

// Cycle adds a whole turn of a well-behaved client: acquire, read, write,
// release, starting at ms and lasting 10 ms.
func (b *Builder) Cycle(p history.Process, ms float64, value, fence int64, req string) *Builder {
	b.Acquire(p, ms, ms+1, fence)
	b.RMW(p, ms+2, ms+6, value, value, fence, req)
	return b.Release(p, ms+8, ms+9)
}

// Nemesis adds a nemesis event.
func (b *Builder) Nemesis(ms float64, f, target, failpoint, detail string) *Builder {
	return b.Add(ms, history.Nemesis, history.Info, f, &history.Value{Target: target, Failpoint: failpoint, Detail: detail})
}

// TB is what Build needs of a test: a testing.TB or a rapid.T.
type TB interface {
	Helper()
	require.TestingT
}

// Build orders and numbers the events and round-trips them through the
// history format, so every hand-written history is also a valid file.
func (b *Builder) Build(t TB) *history.History {
	t.Helper()
	h, err := history.Read(bytes.NewReader(b.JSONL(t)))
	require.NoError(t, err)
	return h
}

// JSONL is the history as a history.jsonl file: the header, then the events
// ordered by time and numbered.
func (b *Builder) JSONL(t TB) []byte {
	t.Helper()
	events := slices.Clone(b.Events)
	slices.SortStableFunc(events, func(x, y history.Event) int { return cmp.Compare(x.Time, y.Time) })
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	require.NoError(t, enc.Encode(history.Header{Version: history.SchemaVersion, StartTime: T0, Config: b.Config, Head: b.Head}))
	for i, e := range events {
		e.Index = int64(i)
		require.NoError(t, enc.Encode(e))
	}
	return buf.Bytes()
}
