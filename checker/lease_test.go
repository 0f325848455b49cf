package checker

import (
	"cmp"
	"slices"
	"testing"

	"github.com/lockcheck/lockcheck/history"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLeaseSafety(t *testing.T) {
	tests := []struct {
		name    string
		history func(b *builder)
		opts    Options
		// violations pairs each later grant's process with the earlier one's.
		violations [][2]history.Process
		faults     []string
	}{
		{
			name: "sequential grants",
			history: func(b *builder) {
				b.Cycle(0, 0, 0, 1, "r1").Cycle(1, 10, 1, 2, "r2").Cycle(2, 20, 2, 3, "r3")
			},
		},
		{
			name: "paused holder whose lease expired is no violation",
			history: func(b *builder) {
				b.Acquire(0, 0, 1, 1).Nemesis(5, history.NemPause, "c0", "", "")
				b.AcquireFail(1, 50, 51).Acquire(1, 110, 111, 2).Release(1, 150, 151)
				b.Nemesis(300, history.NemResume, "c0", "", "").Release(0, 301, 302)
			},
		},
		{
			name: "a late DEL release frees another client's lease",
			history: func(b *builder) {
				b.Acquire(0, 0, 1, 1).Nemesis(5, history.NemPause, "c0", "", "")
				b.Acquire(1, 110, 111, 2)
				// c0 wakes up and deletes c1's key; c2 gets the lock.
				b.Nemesis(115, history.NemResume, "c0", "", "").Release(0, 120, 121)
				b.Acquire(2, 125, 126, 3).Release(2, 130, 131)
				b.Release(1, 200, 201)
			},
			violations: [][2]history.Process{{2, 1}},
		},
		{
			name: "overlapping acquires both granted",
			history: func(b *builder) {
				b.Acquire(0, 0, 10, 1).Acquire(1, 5, 8, 2)
				b.Release(0, 20, 21).Release(1, 22, 23)
			},
			violations: [][2]history.Process{{0, 1}},
		},
		{
			name: "a grant after the earlier lease's release",
			history: func(b *builder) {
				b.Acquire(0, 0, 1, 1).Acquire(1, 5, 60, 2).Release(0, 50, 51).Release(1, 70, 71)
			},
		},
		{
			name: "a grant after the lease expired",
			history: func(b *builder) {
				b.Acquire(0, 0, 1, 1).Acquire(1, 150, 151, 2).Release(1, 160, 161)
			},
		},
		{
			name: "an extend pushes the lease out",
			history: func(b *builder) {
				b.Acquire(0, 0, 1, 1).Extend(0, 80, 81, 100)
				b.Acquire(1, 150, 151, 2).Release(1, 160, 161)
			},
			violations: [][2]history.Process{{1, 0}},
		},
		{
			name: "the clock allowance keeps a grant at the edge of the lease",
			history: func(b *builder) {
				b.Acquire(0, 0, 1, 1).Acquire(1, 98.5, 99, 2)
			},
		},
		{
			name: "without allowance the same grant is a violation",
			history: func(b *builder) {
				b.Acquire(0, 0, 1, 1).Acquire(1, 98.5, 99, 2)
			},
			opts:       Options{ClockAllowance: func(int64) int64 { return 0 }},
			violations: [][2]history.Process{{1, 0}},
		},
		{
			name: "a killed holder's lease still binds",
			history: func(b *builder) {
				b.Acquire(0, 0, 1, 1).Nemesis(20, history.NemKill, "c0", "", "")
				b.Acquire(1, 40, 50, 2).Release(1, 60, 61)
			},
			violations: [][2]history.Process{{1, 0}},
			faults:     []string{"kill c0"},
		},
		{
			name: "a retired holder's lease still binds",
			history: func(b *builder) {
				b.Acquire(0, 0, 1, 1).Op(0, history.FRead, 2, nil, 30, history.Info, nil)
				b.Acquire(1, 40, 50, 2).Release(1, 60, 61)
			},
			violations: [][2]history.Process{{1, 0}},
		},
		{
			name: "the same process granted again is no violation",
			history: func(b *builder) {
				b.Acquire(0, 0, 1, 1).Acquire(0, 10, 11, 2).Release(0, 20, 21)
			},
		},
		{
			name: "the later grant is paired with the longest live lease",
			history: func(b *builder) {
				b.Acquire(0, 0, 1, 1).Release(0, 5, 6)
				b.Acquire(1, 10, 11, 2).Acquire(2, 20, 21, 3)
			},
			violations: [][2]history.Process{{2, 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder("fenced")
			tt.history(b)
			r := Check(b.Build(t), nil, tt.opts)
			ls := r.Checks.LeaseSafety
			require.Equal(t, len(tt.violations), ls.Violations, "%+v", ls.Evidence)
			assert.Equal(t, len(tt.violations) == 0, ls.Valid)
			for i, v := range tt.violations {
				assert.Equal(t, v[0], ls.Evidence[i].Later.Process)
				assert.Equal(t, v[1], ls.Evidence[i].Earlier.Process)
			}
			if tt.faults != nil {
				assert.Equal(t, tt.faults, ls.Evidence[0].Faults)
			}
			if len(tt.violations) > 0 {
				assert.Equal(t, Invalid, r.Valid, r.Reason)
			}
		})
	}
}

func TestGrantBounds(t *testing.T) {
	b := newBuilder("fenced")
	b.Acquire(0, 0, 1, 1).Extend(0, 50, 51, 100).Release(0, 120, 121)
	b.Acquire(1, 130, 131, 2).Nemesis(140, history.NemKill, "c1", "", "")
	b.Acquire(2, 300, 301, 3)
	h := b.Build(t)
	f := scan(h, DefaultClockAllowance)
	require.Len(t, f.keys, 1)
	g := f.keys[0].grants
	require.Len(t, g, 3)

	assert.Equal(t, at(120), g[0].BeliefEnd, "belief ends at the release invoke")
	assert.Equal(t, at(120), g[0].CertainEnd, "the release comes before the extended expiry")

	assert.Equal(t, at(140), g[1].BeliefEnd, "belief ends when the process is killed")
	assert.Equal(t, at(130)+100e6-2.1e6, g[1].CertainEnd, "a killed holder's lease lasts to its expiry less the allowance")

	assert.Equal(t, h.Events[len(h.Events)-1].Time, g[2].BeliefEnd, "belief lasts to the end of the history")
}

// An extend that found the lease gone (the watchdog's renewal returned 0)
// pushes nothing out: a grant after the original expiry is no violation.
func TestLeaseSafetyRefusedExtendPushesNothing(t *testing.T) {
	b := newBuilder("unfenced")
	b.Acquire(0, 0, 1, 1)
	b.Op(0, history.FExtend, 90, &history.Value{TTLms: 100}, 91, history.OK, &history.Value{Accepted: history.Bool(false), TTLms: 100})
	b.Acquire(1, 150, 151, 2)
	assert.Zero(t, check(t, b).Checks.LeaseSafety.Violations)

	b = newBuilder("unfenced")
	b.Acquire(0, 0, 1, 1)
	b.Op(0, history.FExtend, 90, &history.Value{TTLms: 100}, 91, history.OK, &history.Value{Accepted: history.Bool(true), TTLms: 100})
	b.Acquire(1, 150, 151, 2)
	assert.Equal(t, 1, check(t, b).Checks.LeaseSafety.Violations, "an accepted extend keeps the lease live until 190 ms")
}

// A renewal the holder's library sent just before a pause and that was
// read after the resume is judged from when it was sent: recorded as an
// extend invoked then (its sent_ns), or, where it cannot be placed, as a
// lock-renewed observation, the next grant after the service let the
// lease go is no violation. Recorded from when it was read, it would be.
// The events are in the order the recorder writes them: the renewal last.
func TestLeaseSafetyRenewalReadAfterAPause(t *testing.T) {
	renewed := &history.Value{Target: "c0", Token: "0", TTLms: 100, Detail: "renewed by the library, when sent unknown (no sent_ns)"}
	tests := []struct {
		name string
		// renewal adds the record of a renewal sent at 66 ms and read at
		// 270 ms, after c0's resume.
		renewal    func(b *builder)
		violations int
	}{
		{name: "no renewal recorded", renewal: func(*builder) {}},
		{name: "an extend invoked when it was read claims what the service never granted", violations: 1,
			renewal: func(b *builder) { b.Extend(0, 270, 270, 100) }},
		{name: "an extend invoked at its sent_ns", renewal: func(b *builder) { b.Extend(0, 66, 270, 100) }},
		{name: "a lock-renewed observation", renewal: func(b *builder) { b.Add(270, history.Nemesis, history.Info, history.NemLockRenewed, renewed) }},
	}
	var unrenewedEnd int64
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder("unfenced")
			b.Acquire(0, 0, 1, 1).Nemesis(69, history.NemPause, "c0", "", "")
			b.Acquire(1, 170, 171, 2).Nemesis(269, history.NemResume, "c0", "", "")
			tt.renewal(b)
			h := b.Build(t)
			// The recorder writes the renewal when it reads it.
			slices.SortStableFunc(h.Events, func(x, y history.Event) int { return cmp.Compare(readLate(x), readLate(y)) })
			for i := range h.Events {
				h.Events[i].Index = int64(i)
			}
			r := Check(h, nil, Options{})
			assert.Equal(t, tt.violations, r.Checks.LeaseSafety.Violations)
			g := scan(h, DefaultClockAllowance).keys[0].grants
			switch {
			case tt.violations > 0:
				assert.Greater(t, g[0].CertainEnd, at(171))
			case unrenewedEnd == 0:
				unrenewedEnd = g[0].CertainEnd
			case tt.name == "a lock-renewed observation":
				assert.Equal(t, unrenewedEnd, g[0].CertainEnd, "an observation leaves the lease where the grant put it")
			default:
				assert.Less(t, g[0].CertainEnd, at(170), "the lease ends a TTL after the renewal was sent")
			}
		})
	}
}

// readLate orders a renewal's record after the other events.
func readLate(e history.Event) int {
	if e.F == history.FExtend || e.F == history.NemLockRenewed {
		return 1
	}
	return 0
}
