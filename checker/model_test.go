package checker

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/lockcheck/lockcheck/history"
)

// Helpers for the outcomes the builder's shorthand does not write.

func releaseWith(b *builder, p history.Process, inv, end float64, done history.Type, deleted *bool) *builder {
	var v *history.Value
	if done == history.OK {
		v = &history.Value{Accepted: deleted}
	}
	return b.Op(p, history.FRelease, inv, &history.Value{Token: p.String()}, end, done, v)
}

func acquireWith(b *builder, p history.Process, inv, end float64, done history.Type, ttlMs int64) *builder {
	var v *history.Value
	if done == history.OK {
		v = &history.Value{Token: p.String(), TTLms: ttlMs}
	}
	return b.Op(p, history.FAcquire, inv, nil, end, done, v)
}

// TestModelLease holds each lease rule of docs/history.md on a good history
// it must pass and a bad one it must catch.
func TestModelLease(t *testing.T) {
	tests := []struct {
		name       string
		noTTL      bool
		history    func(b *builder)
		violations int
	}{
		{"re-entrant acquire refused, then release: the next grant is safe", false, func(b *builder) {
			b.Acquire(0, 0, 1, -1).AcquireFail(0, 10, 11).Release(0, 20, 21).Acquire(1, 30, 31, -1)
		}, 0},
		{"re-entrant acquire refused: a grant to another before the release", false, func(b *builder) {
			b.Acquire(0, 0, 1, -1).AcquireFail(0, 10, 11).Acquire(1, 15, 16, -1).Release(0, 20, 21)
		}, 1},
		{"no TTL, re-entrant acquire refused, then release: the next grant is safe", true, func(b *builder) {
			acquireWith(b, 0, 0, 1, history.OK, 0).AcquireFail(0, 10, 11).Release(0, 500, 501)
			acquireWith(b, 1, 600, 601, history.OK, 0).Release(1, 700, 701)
		}, 0},
		{"no TTL, a grant to another while held", true, func(b *builder) {
			acquireWith(b, 0, 0, 1, history.OK, 0).AcquireFail(0, 10, 11)
			acquireWith(b, 1, 600, 601, history.OK, 0).Release(0, 700, 701)
		}, 1},
		{"re-entrant acquire granted, then release: the next grant is safe", false, func(b *builder) {
			b.Acquire(0, 0, 1, -1).Acquire(0, 50, 51, -1).Release(0, 60, 61).Acquire(1, 70, 71, -1)
		}, 0},
		{"re-entrant acquire granted: a grant to another before the release", false, func(b *builder) {
			b.Acquire(0, 0, 1, -1).Acquire(0, 50, 51, -1).Acquire(1, 55, 56, -1).Release(0, 60, 61)
		}, 1},
		{"re-entrant acquire unknown retires the holder: its lease lasts until it expires", false, func(b *builder) {
			acquireWith(b.Acquire(0, 0, 1, -1), 0, 10, 11, history.Info, 0).Acquire(1, 150, 151, -1)
		}, 0},
		{"re-entrant acquire unknown: a grant to another before the lease expired", false, func(b *builder) {
			acquireWith(b.Acquire(0, 0, 1, -1), 0, 10, 11, history.Info, 0).Acquire(1, 50, 51, -1)
		}, 1},
		{"a release that failed leaves the lease live until it expires", false, func(b *builder) {
			releaseWith(b.Acquire(0, 0, 1, -1), 0, 10, 11, history.Fail, nil).Acquire(1, 150, 151, -1)
		}, 0},
		{"a grant inside a lease whose release failed", false, func(b *builder) {
			releaseWith(b.Acquire(0, 0, 1, -1), 0, 10, 11, history.Fail, nil).Acquire(1, 20, 21, -1)
		}, 1},
		{"a grant inside a lease whose release deleted nothing", false, func(b *builder) {
			releaseWith(b.Acquire(0, 0, 1, -1), 0, 10, 11, history.OK, history.Bool(false)).Acquire(1, 20, 21, -1)
		}, 1},
		// Redlock reports accepted false when no majority deleted the key,
		// which some nodes may have done.
		{"a multi-node release that found no majority may have ended the lease", false, func(b *builder) {
			releaseWith(b.AcquireOn(0, 0, 1, "redlock-1", "redlock-2", "redlock-3"), 0, 10, 11, history.OK, history.Bool(false)).Acquire(1, 20, 21, -1)
		}, 0},
		{"a failed release retried: the retry ends the lease", false, func(b *builder) {
			releaseWith(b.Acquire(0, 0, 1, -1), 0, 10, 11, history.Fail, nil)
			releaseWith(b, 0, 12, 13, history.OK, history.Bool(true)).Acquire(1, 20, 21, -1)
		}, 0},
		{"a release of unknown outcome may have ended the lease at its invoke", false, func(b *builder) {
			releaseWith(b.Acquire(0, 0, 1, -1), 0, 10, 11, history.Info, nil).Acquire(1, 20, 21, -1)
		}, 0},
		{"a release that never completed may have ended the lease", false, func(b *builder) {
			b.Acquire(0, 0, 1, -1).Add(10, 0, history.Invoke, history.FRelease, nil).Acquire(1, 20, 21, -1)
		}, 0},
		{"an extend pushes the lease out", false, func(b *builder) {
			b.Acquire(0, 0, 1, -1).Extend(0, 50, 51, 100).Acquire(1, 120, 121, -1)
		}, 1},
		// Found by the differential test: a grant whose own lease had run
		// out by the time it returned still lies inside the other's lease
		// in every order the two can have happened in.
		{"a slow grant inside another's lease, its own lease already out", false, func(b *builder) {
			acquireWith(b, 0, 0, 0, history.OK, 5)
			acquireWith(b, 0, 1, 4, history.OK, 5)
			acquireWith(b, 1, 3, 3, history.OK, 5)
		}, 1},
		// Found by the differential test: a holder's re-entrant grant
		// continues its lease; the earlier grant's lease does not end at
		// the new grant's return.
		{"a grant inside a lease continued by a re-entrant grant", false, func(b *builder) {
			acquireWith(b, 0, 0, 0, history.OK, 5)
			acquireWith(b, 0, 1, 4, history.OK, 5)
			acquireWith(b, 1, 3, 3, history.OK, 5)
			acquireWith(b, 1, 3, 4, history.OK, 5)
		}, 1},
		{"equal timestamps: a hand-over at one instant", false, func(b *builder) {
			b.Acquire(0, 0, 1, -1).Release(0, 10, 10).Acquire(1, 10, 10, -1)
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder("unfenced")
			if tt.noTTL {
				b.Config.TTLms = 0
			}
			tt.history(b)
			r := check(t, b)
			assert.Equal(t, tt.violations, r.Checks.LeaseSafety.Violations)
			assert.Equal(t, tt.violations == 0, r.Checks.LeaseSafety.Valid)
		})
	}
}

// TestModelApplicability holds the rules that say when a check cannot be
// evaluated, on a history where it can and one where it cannot.
func TestModelApplicability(t *testing.T) {
	onKey := func(b *builder, key string) *builder {
		for i := range b.Events {
			if f := b.Events[i].F; f == history.FRead || f == history.FWrite {
				b.Events[i].Key = key
			}
		}
		return b
	}
	tests := []struct {
		name     string
		workload string
		history  func(b *builder) *builder
		valid    Validity
		check    func(t *testing.T, c *Checks)
	}{
		{"writes on the lock's key are tied to it", "unfenced", func(b *builder) *builder {
			return b.Cycle(0, 0, 0, -1, "r1").Cycle(1, 20, 1, -1, "r2")
		}, Valid, func(t *testing.T, c *Checks) {
			assert.Empty(t, c.DoubleOwnership.State)
			assert.Zero(t, c.DoubleOwnership.UntiedWrites)
		}},
		{"writes on a key no acquire names make double ownership unknown", "unfenced", func(b *builder) *builder {
			return onKey(b.Cycle(0, 0, 0, -1, "r1").Cycle(1, 20, 1, -1, "r2"), "counter")
		}, Unknown, func(t *testing.T, c *Checks) {
			assert.Equal(t, StateUnknown, c.DoubleOwnership.State)
			assert.Equal(t, 2, c.DoubleOwnership.UntiedWrites)
			assert.Contains(t, c.DoubleOwnership.StateReason, "2 writes are on keys no acquire names")
		}},
		{"untied writes under fencing: the resource judges them", "fenced", func(b *builder) *builder {
			return onKey(b.Cycle(0, 0, 0, 1, "r1").Cycle(1, 20, 1, 2, "r2"), "counter")
		}, Valid, func(t *testing.T, c *Checks) { assert.Equal(t, StateUnknown, c.DoubleOwnership.State) }},
		{"writes that say prev are judged", "unfenced", func(b *builder) *builder {
			return b.Cycle(0, 0, 0, -1, "r1")
		}, Valid, func(t *testing.T, c *Checks) {
			assert.Empty(t, c.Resource.State)
			assert.Zero(t, c.Resource.Unjudged)
		}},
		{"writes with no prev and no resource log make the resource check unknown", "unfenced", func(b *builder) *builder {
			b.Cycle(0, 0, 0, -1, "r1")
			for i := range b.Events {
				if b.Events[i].F == history.FWrite && b.Events[i].Type == history.OK {
					b.Events[i].Value.Prev = nil
				}
			}
			return b
		}, Unknown, func(t *testing.T, c *Checks) {
			assert.Equal(t, StateUnknown, c.Resource.State)
			assert.Equal(t, 1, c.Resource.Unjudged)
			assert.Zero(t, c.Resource.LostUpdates)
		}},
		{"fences handed out: fencing is checked", "fenced", func(b *builder) *builder {
			return b.Cycle(0, 0, 0, 1, "r1")
		}, Valid, func(t *testing.T, c *Checks) { assert.Empty(t, c.Fencing.State) }},
		{"no fence handed out: fencing is skipped", "unfenced", func(b *builder) *builder {
			return b.Cycle(0, 0, 0, -1, "r1")
		}, Valid, func(t *testing.T, c *Checks) {
			assert.Equal(t, StateSkipped, c.Fencing.State)
			assert.Equal(t, "no grant carried a fence", c.Fencing.StateReason)
		}},
		{"nemesis events only: nothing was tested", "unfenced", func(b *builder) *builder {
			return b.Nemesis(0, history.NemPause, "redis-0", "", "").Nemesis(10, history.NemResume, "redis-0", "", "")
		}, Unknown, func(t *testing.T, c *Checks) { assert.Zero(t, c.Liveness.AcquireAttempts) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := check(t, tt.history(newBuilder(tt.workload)))
			assert.Equal(t, tt.valid, r.Valid, r.Reason)
			tt.check(t, &r.Checks)
		})
	}
}

func TestReasonTimesReadApart(t *testing.T) {
	tests := []struct {
		a, b       int64
		wantA, wan string
	}{
		{1e9, 1e9 + 1, "1.000000000s", "1.000000001s"},
		{1e9, 1e9, "1.00s", "1.00s"},
		{1e9, 2e9, "1.00s", "2.00s"},
		{1e9, 1e9 + 3e6, "1.000s", "1.003s"},
	}
	for _, tt := range tests {
		a, b := relSecondsApart(tt.a, tt.b)
		assert.Equal(t, []string{tt.wantA, tt.wan}, []string{a, b})
	}
}

func TestReasonFaultInForce(t *testing.T) {
	pause := Fault{Kind: history.NemPause, Target: "c0", Start: at(5), End: at(115)}
	tests := []struct {
		name string
		f    Fault
		at   int64
		want string
	}{
		{"in force", pause, at(100), "while c0 was paused"},
		{"healed before", pause, at(126), "11 ms after the pause of c0 healed"},
		{"healed long before", pause, at(2115), "2.0s after the pause of c0 healed"},
		{"partition in force", Fault{Kind: history.NemPartition, Target: "redis-1", Start: at(0), End: at(50)}, at(50), "while redis-1 was cut off the network"},
		{"partition of some links in force", Fault{Kind: history.NemPartition, Target: "redis-1", Detail: "cut off from c0, redis-0", Start: at(0), End: at(50)}, at(50), "while redis-1 was cut off from c0, redis-0"},
		{"a kill is told as after", Fault{Kind: history.NemKill, Target: "redis-0", Start: at(0), End: at(0)}, at(50), "after redis-0 was killed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, faultPhraseAt(tt.f, tt.at)) })
	}
}

// A nanosecond between a grant and the end of the lease it broke reads as
// a difference.
func TestReasonOfANanosecondViolation(t *testing.T) {
	b := newBuilder("unfenced")
	b.Acquire(0, 0, 1, -1)
	b.Add(50, 0, history.Invoke, history.FRelease, &history.Value{Token: "c0"})
	b.Events = append(b.Events, history.Event{Time: at(50) + 1, Process: 0, Type: history.OK, F: history.FRelease, Key: lockKey})
	b.Events = append(b.Events, history.Event{Time: at(49), Process: 1, Type: history.Invoke, F: history.FAcquire, Key: lockKey},
		history.Event{Time: at(50) - 1, Process: 1, Type: history.OK, F: history.FAcquire, Key: lockKey, Value: &history.Value{TTLms: 100}})
	r := check(t, b)
	assert.Equal(t, Invalid, r.Valid)
	assert.Contains(t, r.Reason, "c1 was granted lock-0 at 0.049999999s while c0's lease was certainly live until 0.050000000s")
}
