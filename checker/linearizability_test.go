package checker

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/lockcheck/lockcheck/history"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chain adds n well-behaved cycles, each reading the value the one before
// wrote, alternating over three processes.
func chain(b *builder, n int) *builder {
	for i := 0; i < n; i++ {
		b.Cycle(history.Process(i%3), float64(10*i), int64(i), int64(i+1), "")
	}
	return b
}

// infoWrite is c0 reading 0 and timing out on its write of 1 (req "a"),
// then c1 reading 1 and writing 2 (req "b").
func infoWrite() *builder {
	b := newBuilder("fenced")
	b.Acquire(0, 0, 1, 1).Read(0, 2, 3, 0)
	b.Write(0, 4, 50, 1, 0, 1, "a", history.Info, false, 0)
	b.Acquire(1, 200, 201, 2).RMW(1, 202, 205, 1, 1, 2, "b").Release(1, 206, 207)
	return b
}

func TestLinearizability(t *testing.T) {
	accepted := func(seq int64, p history.Process, req string, fence, read int64, ms float64) history.ResourceEntry {
		e := entry(seq, p, req, fence, read, read+1, read, true)
		e.Time = at(ms)
		return e
	}
	tests := []struct {
		name     string
		b        *builder
		log      []history.ResourceEntry
		result   string
		ops      int
		segments int
	}{
		{
			name:   "sequential read-modify-writes",
			b:      chain(newBuilder("fenced"), 3),
			result: Linearizable, ops: 3, segments: 1,
		},
		{
			name: "two clients wrote the same value over the same read",
			b: newBuilder("unfenced").Cycle(0, 0, 0, -1, "").
				Acquire(1, 10, 11, -1).RMW(1, 12, 16, 0, 1, -1, "").Release(1, 18, 19),
			result: NotLinearizable, ops: 2, segments: 1,
		},
		{
			name:   "a paused holder's refused write linearizes before the newer one",
			b:      pausedHolder("fenced"),
			result: Linearizable, ops: 2, segments: 1,
		},
		{
			name:   "a paused holder's accepted write overwrote the newer one",
			b:      pausedHolder("unfenced"),
			result: NotLinearizable, ops: 2, segments: 1,
		},
		{
			name: "a read-only operation must see the last write",
			b: newBuilder("fenced").Cycle(0, 0, 0, 1, "").
				Acquire(1, 10, 11, 2).Read(1, 12, 13, 0).Release(1, 14, 15),
			result: NotLinearizable, ops: 2, segments: 1,
		},
		{
			name: "a read after a skipped write sees the old value",
			b: newBuilder("fenced").Cycle(0, 0, 0, 1, "").
				Acquire(1, 10, 11, 2).Read(1, 12, 13, 1).Release(1, 14, 15).
				Cycle(2, 20, 1, 3, ""),
			result: Linearizable, ops: 3, segments: 1,
		},
		{
			name:   "an info write the resource log accepted",
			b:      infoWrite(),
			log:    []history.ResourceEntry{accepted(1, 0, "a", 1, 0, 20), accepted(2, 1, "b", 2, 1, 204)},
			result: Linearizable, ops: 2, segments: 1,
		},
		{
			name:   "an info write missing from the resource log never happened",
			b:      infoWrite(),
			log:    []history.ResourceEntry{accepted(2, 1, "b", 2, 1, 204)},
			result: NotLinearizable, ops: 2, segments: 1,
		},
		{
			name:   "an info write with no resource log may have happened",
			b:      infoWrite(),
			result: Linearizable, ops: 2, segments: 1,
		},
		{
			name:   "long histories are cut at quiescent points",
			b:      chain(newBuilder("fenced"), 1200),
			result: Linearizable, ops: 1200, segments: 3,
		},
		{
			name: "a stale read after the cut is caught from the carried state",
			b: chain(newBuilder("fenced"), 1100).
				Acquire(1, 20000, 20001, 2000).Read(1, 20002, 20003, 500).Release(1, 20004, 20005),
			result: NotLinearizable, ops: 1101, segments: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Check(tt.b.Build(t), tt.log, Options{})
			l := r.Checks.Linearizability
			assert.Equal(t, tt.result, l.Result, l.Detail)
			assert.Equal(t, tt.ops, l.Operations)
			assert.Equal(t, tt.segments, l.Segments)
			if tt.result == NotLinearizable {
				assert.Equal(t, Invalid, r.Valid)
				assert.NotEmpty(t, r.Reason)
				require.NotNil(t, l.Window)
				assert.Equal(t, lockKey, l.Key)
			} else {
				assert.Nil(t, l.Window)
			}
		})
	}
}

func TestLinearizabilityWindowIsTheFailingSegment(t *testing.T) {
	b := chain(newBuilder("fenced"), 1100)
	b.Acquire(1, 20000, 20001, 2000).Read(1, 20002, 20003, 500).Release(1, 20004, 20005)
	l := check(t, b).Checks.Linearizability
	require.NotNil(t, l.Window)
	// The third segment starts with cycle 1000, whose read is invoked 2 ms
	// into its 10 ms turn.
	assert.Equal(t, Interval{Start: at(10002), End: at(20003)}, *l.Window)
	assert.Contains(t, l.Detail, "segment 3 of 3 on lock-0 (101 operations")
}

// sequentialOps are n operations that each read what the one before wrote.
func sequentialOps(n int) []porcupine.Operation {
	ops := make([]porcupine.Operation, n)
	for i := range ops {
		ops[i] = porcupine.Operation{
			Input:  rmwInput{kind: opWriteAccepted, value: int64(i + 1)},
			Output: rmwOutput{read: int64(i), known: true},
			Call:   int64(10 * i), Return: int64(10*i + 5),
		}
	}
	return ops
}

func TestSegmentCuts(t *testing.T) {
	starts := func(segs []segment) []int64 {
		var s []int64
		for _, seg := range segs {
			s = append(s, seg.ops[0].Call)
		}
		return s
	}
	t.Run("cut once a segment is long enough", func(t *testing.T) {
		segs := segmentOps(lockKey, sequentialOps(1100), math.MaxInt64)
		assert.Equal(t, []int64{0, 5000, 10000}, starts(segs))
		assert.Equal(t, oneValue(500), segs[1].init, "the state after op 499")
		assert.Equal(t, regState{}, segs[0].init, "the first segment starts from any value")
	})
	t.Run("no cut while an earlier op is in flight", func(t *testing.T) {
		ops := sequentialOps(1100)
		ops[0].Return = 5500 // op 0 overlaps ops 1 to 550
		segs := segmentOps(lockKey, ops, math.MaxInt64)
		assert.Equal(t, []int64{0, 5520, 10520}, starts(segs), "the first cut needs op 551 clear of op 0 and op 552 after it")
	})
	t.Run("no cut after an op that overlaps the one before it", func(t *testing.T) {
		ops := sequentialOps(1100)
		ops[499].Call = ops[498].Call + 1 // op 499 overlaps op 498
		segs := segmentOps(lockKey, ops, math.MaxInt64)
		assert.Equal(t, []int64{0, 5010, 10010}, starts(segs))
	})
	t.Run("a refused write carries the value it read", func(t *testing.T) {
		ops := sequentialOps(1100)
		ops[499].Input = rmwInput{kind: opWriteRefused, value: 500}
		segs := segmentOps(lockKey, ops, math.MaxInt64)
		assert.Equal(t, oneValue(499), segs[1].init)
	})
}

func TestLinearizabilityUnknownIsNoPass(t *testing.T) {
	t.Run("a timeout", func(t *testing.T) {
		restore := checkSegmentTimeout
		t.Cleanup(func() { checkSegmentTimeout = restore })
		checkSegmentTimeout = func(porcupine.Model, []porcupine.Operation, time.Duration) porcupine.CheckResult {
			return porcupine.Unknown
		}
		r := check(t, chain(newBuilder("fenced"), 3))
		assert.Equal(t, LinearizabilityUnknown, r.Checks.Linearizability.Result)
		assert.Equal(t, Unknown, r.Valid)
		assert.Contains(t, r.Reason, "No safety check failed, but the linearizability check could not finish")
		assert.Contains(t, r.Checks.Linearizability.Detail, "could not be decided within the 10s timeout")
	})
	t.Run("a tiny timeout", func(t *testing.T) {
		r := Check(chain(newBuilder("fenced"), 3).Build(t), nil, Options{LinearizabilityTimeout: time.Nanosecond})
		assert.Equal(t, LinearizabilityUnknown, r.Checks.Linearizability.Result)
		assert.Equal(t, Unknown, r.Valid)
	})
	t.Run("illegal beats unknown", func(t *testing.T) {
		restore := checkSegmentTimeout
		t.Cleanup(func() { checkSegmentTimeout = restore })
		checkSegmentTimeout = func(m porcupine.Model, ops []porcupine.Operation, d time.Duration) porcupine.CheckResult {
			if ops[0].Call == at(2) {
				return porcupine.Unknown // the first segment times out
			}
			return restore(m, ops, d)
		}
		b := chain(newBuilder("fenced"), 1100)
		b.Acquire(1, 20000, 20001, 2000).Read(1, 20002, 20003, 500).Release(1, 20004, 20005)
		r := check(t, b)
		assert.Equal(t, NotLinearizable, r.Checks.Linearizability.Result)
		assert.Equal(t, Invalid, r.Valid)
	})
	t.Run("a segment too long to cut", func(t *testing.T) {
		ops := sequentialOps(maxSegmentOps + 1)
		ops[0].Return = math.MaxInt64 // a write whose outcome stays unknown
		c := newLinearizabilityCheck(time.Minute)
		for _, seg := range segmentOps(lockKey, ops, math.MaxInt64) {
			c.add(seg)
		}
		l := c.result(func(string) int { return 1 }, Interval{End: math.MaxInt64})
		assert.Equal(t, 1, l.Segments)
		assert.Equal(t, LinearizabilityUnknown, l.Result)
		assert.Contains(t, l.Detail, "no quiescent point")
	})
}

func TestLinearizabilityVisualization(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, Check(pausedHolder("unfenced").Build(t), nil, Options{}).Checks.Linearizability.Visualize(Options{}, &buf))
	assert.Contains(t, buf.String(), "c0 read 0, wrote 1")

	err := Check(pausedHolder("fenced").Build(t), nil, Options{}).Checks.Linearizability.Visualize(Options{}, &buf)
	assert.ErrorIs(t, err, ErrNothingToVisualize)
}
