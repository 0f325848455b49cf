package checker

import (
	"testing"

	"github.com/lockcheck/lockcheck/history"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pausedHolder is the classic: c0 reads under the lock and is paused past
// its TTL; c1 gets the lock, reads, writes, releases; c0 wakes up and
// writes what it computed before the pause. With a fence the resource
// refuses c0's stale write; without one it overwrites c1's.
func pausedHolder(workload string) *builder {
	fenced := workload == "fenced"
	b := newBuilder(workload)
	b.Acquire(0, 0, 1, 1).Read(0, 2, 3, 0).Nemesis(5, history.NemPause, "c0", "", "")
	b.AcquireFail(1, 50, 51).Acquire(1, 110, 111, 2)
	b.RMW(1, 112, 115, 0, 0, 2, "r2").Release(1, 120, 121)
	b.Nemesis(300, history.NemResume, "c0", "", "")
	b.Write(0, 301, 302, 1, 0, 1, "r1", history.OK, !fenced, 1)
	return b.Release(0, 303, 304)
}

// pausedThrough3 is pausedHolder with three clients granted the lock one
// after another while c0 is paused: c1 and c2 write, c3 does not.
func pausedThrough3(workload string) *builder {
	fenced := workload == "fenced"
	b := newBuilder(workload)
	b.Acquire(0, 0, 1, 1).Read(0, 2, 3, 0).Nemesis(5, history.NemPause, "c0", "", "")
	b.Acquire(1, 110, 111, 2).RMW(1, 112, 115, 0, 0, 2, "r2").Release(1, 120, 121)
	b.Acquire(2, 125, 126, 3).RMW(2, 127, 130, 1, 1, 3, "r3").Release(2, 132, 133)
	b.Acquire(3, 140, 141, 4).Release(3, 150, 151)
	b.Nemesis(300, history.NemResume, "c0", "", "")
	b.Write(0, 301, 302, 1, 0, 1, "r1", history.OK, !fenced, 2)
	return b.Release(0, 303, 304)
}

func TestDoubleOwnership(t *testing.T) {
	tests := []struct {
		name     string
		b        *builder
		windows  []Window
		verdict  Validity
		unsafeWr int
	}{
		{
			name:    "sequential owners never overlap",
			b:       newBuilder("unfenced").Cycle(0, 0, 0, 1, "r1").Cycle(1, 10, 1, 2, "r2").Cycle(0, 20, 2, 3, "r3"),
			verdict: Valid,
		},
		{
			name: "paused holder, unfenced: the overlap makes the verdict false",
			b:    pausedHolder("unfenced"),
			windows: []Window{{
				Key: lockKey, Start: at(111), End: at(120), Ms: 9, Processes: []history.Process{0, 1},
				Faults: []string{"pause c0"}, Writes: []int64{11}, Unsafe: 1,
			}},
			unsafeWr: 1,
			verdict:  Invalid,
		},
		{
			name: "paused holder, fenced: the overlap is reported, the verdict holds",
			b:    pausedHolder("fenced"),
			windows: []Window{{
				Key: lockKey, Start: at(111), End: at(120), Ms: 9, Processes: []history.Process{0, 1},
				Faults: []string{"pause c0"}, Writes: []int64{11}, Unsafe: 1,
			}},
			unsafeWr: 1,
			verdict:  Valid,
		},
		{
			name: "a paused holder overlapped by three successive grants is one window",
			b:    pausedThrough3("fenced"),
			windows: []Window{{
				Key: lockKey, Start: at(111), End: at(150), Ms: 39, Processes: []history.Process{0, 1, 2, 3},
				Faults: []string{"pause c0"}, Writes: []int64{9, 17}, Unsafe: 2,
			}},
			unsafeWr: 2,
			verdict:  Valid,
		},
		{
			name: "two separate episodes are two windows",
			b: pausedHolder("fenced").Acquire(2, 400, 401, 3).Nemesis(405, history.NemPause, "c2", "", "").
				Acquire(1, 510, 511, 4).Release(1, 520, 521).
				Nemesis(600, history.NemResume, "c2", "", "").Release(2, 603, 604),
			windows: []Window{
				{
					Key: lockKey, Start: at(111), End: at(120), Ms: 9, Processes: []history.Process{0, 1},
					Faults: []string{"pause c0"}, Writes: []int64{11}, Unsafe: 1,
				},
				{Key: lockKey, Start: at(511), End: at(520), Ms: 9, Processes: []history.Process{1, 2}, Faults: []string{"pause c2"}},
			},
			unsafeWr: 1,
			verdict:  Valid,
		},
		{
			name: "one process's grants in sequence never overlap",
			b: newBuilder("fenced").Acquire(0, 0, 1, 1).Acquire(0, 10, 11, 2).RMW(0, 12, 14, 0, 0, 2, "r1").
				Acquire(0, 20, 21, 3).Release(0, 30, 31).Cycle(0, 40, 1, 4, "r2"),
			verdict: Valid,
		},
		{
			name:    "a hand-over at one instant is no overlap",
			b:       newBuilder("fenced").Acquire(0, 0, 1, 1).Release(0, 10, 11).Acquire(1, 5, 10, 2).Release(1, 20, 21),
			verdict: Valid,
		},
		{
			name: "a killed holder believes nothing",
			b: newBuilder("unfenced").Acquire(0, 0, 1, 1).Nemesis(5, history.NemKill, "c0", "", "").
				Acquire(1, 150, 151, 2).Release(1, 160, 161),
			verdict: Valid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := check(t, tt.b)
			d := r.Checks.DoubleOwnership
			require.Len(t, d.List, len(tt.windows))
			assert.Equal(t, tt.windows, d.List)
			assert.Equal(t, len(tt.windows), d.Windows)
			assert.Equal(t, tt.unsafeWr, d.UnsafeWrites)
			var total, longest float64
			for _, w := range tt.windows {
				total += w.Ms
				longest = max(longest, w.Ms)
			}
			assert.InDelta(t, total, d.TotalMs, 1e-9)
			assert.InDelta(t, longest, d.MaxMs, 1e-9)
			assert.Equal(t, tt.verdict, r.Valid, r.Reason)
		})
	}
}

func TestReasonOfAMergedWindow(t *testing.T) {
	r := check(t, pausedThrough3("unfenced"))
	assert.Equal(t, Invalid, r.Valid)
	assert.Equal(t, "c0 believed it held lock-0 through a 295 ms pause; the service had let its lease go by 0.10s, and c1, c2 and c3 were granted it: two clients believed they held it "+
		"for 39 ms, and the resource accepted 2 writes of theirs without fencing; "+
		"c0's write with fence 1 overwrote a value it had not read (lost update).", r.Reason)
}

// TestReasonOfAPausedSessionHolder: a lock that lives on a session outlives
// its holder's pause, so the holder still held it when another was granted
// it (the service broke its promise); a lease with a TTL it only believed
// in (TestReasonOfAMergedWindow).
func TestReasonOfAPausedSessionHolder(t *testing.T) {
	b := newBuilder("unfenced")
	b.Config.TTLms = 0
	sessionGrant(b, 0, 0, 1).Nemesis(5, history.NemPause, "c0", "", "")
	sessionGrant(b, 1, 50, 51).Release(1, 100, 101)
	b.Nemesis(300, history.NemResume, "c0", "", "").Release(0, 303, 304)
	r := check(t, b)
	assert.Contains(t, r.Reason, "c0 held lock-0 through a 295 ms pause while c1 was granted it")
	assert.NotContains(t, r.Reason, "believed it held")
}
