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
	b.acquire(0, 0, 1, 1).read(0, 2, 3, 0).nemesis(5, history.NemPause, "c0", "", "")
	b.acquireFail(1, 50, 51).acquire(1, 110, 111, 2)
	b.rmw(1, 112, 115, 0, 0, 2, "r2").release(1, 120, 121)
	b.nemesis(300, history.NemResume, "c0", "", "")
	b.write(0, 301, 302, 1, 0, 1, "r1", history.OK, !fenced, 1)
	return b.release(0, 303, 304)
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
			b:       newBuilder("unfenced").cycle(0, 0, 0, 1, "r1").cycle(1, 10, 1, 2, "r2").cycle(0, 20, 2, 3, "r3"),
			verdict: Valid,
		},
		{
			name: "paused holder, unfenced: the overlap makes the verdict false",
			b:    pausedHolder("unfenced"),
			windows: []Window{{
				Key: lockKey, Start: at(111), End: at(120), Ms: 9, Processes: [2]history.Process{0, 1},
				Faults: []string{"pause c0"}, Writes: []int64{11}, Unsafe: 1,
			}},
			unsafeWr: 1,
			verdict:  Invalid,
		},
		{
			name: "paused holder, fenced: the overlap is reported, the verdict holds",
			b:    pausedHolder("fenced"),
			windows: []Window{{
				Key: lockKey, Start: at(111), End: at(120), Ms: 9, Processes: [2]history.Process{0, 1},
				Faults: []string{"pause c0"}, Writes: []int64{11}, Unsafe: 1,
			}},
			unsafeWr: 1,
			verdict:  Valid,
		},
		{
			name: "a killed holder believes nothing",
			b: newBuilder("unfenced").acquire(0, 0, 1, 1).nemesis(5, history.NemKill, "c0", "", "").
				acquire(1, 150, 151, 2).release(1, 160, 161),
			verdict: Valid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.b.check(t)
			d := r.Checks.DoubleOwnership
			require.Len(t, d.List, len(tt.windows))
			assert.Equal(t, tt.windows, d.List)
			assert.Equal(t, len(tt.windows), d.Windows)
			assert.Equal(t, tt.unsafeWr, d.UnsafeWrites)
			var total float64
			for _, w := range tt.windows {
				total += w.Ms
			}
			assert.InDelta(t, total, d.TotalMs, 1e-9)
			assert.Equal(t, tt.verdict, r.Valid, r.Reason)
		})
	}
}
