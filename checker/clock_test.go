package checker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/history"
)

func TestClockFaultsAreIntervals(t *testing.T) {
	tests := []struct {
		name    string
		history func(b *builder)
		want    []Fault
	}{
		{
			name: "a clock jump lasts until its reset",
			history: func(b *builder) {
				b.Nemesis(10, history.NemClockJump, "redlock-3", "", "+20s").Nemesis(40, history.NemClockReset, "redlock-3", "", "reset")
				b.Cycle(0, 50, 0, -1, "r1")
			},
			want: []Fault{{Kind: history.NemClockJump, Target: "redlock-3", Start: at(10), End: at(40), Detail: "+20s"}},
		},
		{
			name: "a clock never reset lasts to the end",
			history: func(b *builder) {
				b.Nemesis(10, history.NemClockJump, "redlock-3", "", "-20s")
				b.Cycle(0, 50, 0, -1, "r1")
			},
			want: []Fault{{Kind: history.NemClockJump, Target: "redlock-3", Start: at(10), End: at(59), Detail: "-20s"}},
		},
		{
			name: "a kill ends the pause of a stopped node",
			history: func(b *builder) {
				b.Nemesis(10, history.NemPause, "redlock-4", "", "").Nemesis(30, history.NemKill, "redlock-4", "", "")
				b.Nemesis(35, history.NemStart, "redlock-4", "", "")
				b.Cycle(0, 50, 0, -1, "r1")
			},
			want: []Fault{
				{Kind: history.NemPause, Target: "redlock-4", Start: at(10), End: at(30)},
				{Kind: history.NemKill, Target: "redlock-4", Start: at(30), End: at(35)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder("unfenced")
			tt.history(b)
			r := check(t, b)
			for i := range r.Faults {
				r.Faults[i].Index = 0
			}
			assert.Equal(t, tt.want, r.Faults)
		})
	}
}

// Kleppmann's case as a history: c0 wins redlock-1..3 while 4 and 5 are
// stopped, redlock-3's clock jumps, c1 wins redlock-3..5. The verdict names
// the jump on the node both majorities share, not the pauses around it.
func TestLeaseViolationBlamesTheNodeThatForgot(t *testing.T) {
	tests := []struct {
		name    string
		faults  func(b *builder)
		unnamed bool // the grants do not name their nodes (redsync)
		want    string
	}{
		{
			name: "clock jump on the shared node",
			faults: func(b *builder) {
				b.Nemesis(20, history.NemClockJump, "redlock-3", "", "+20s")
			},
			want: "after redlock-3's clock jumped +20s",
		},
		{
			name: "restart of the shared node",
			faults: func(b *builder) {
				b.Nemesis(20, history.NemKill, "redlock-3", "", "data wiped").Nemesis(22, history.NemStart, "redlock-3", "", "data wiped")
			},
			want: "after redlock-3 was killed",
		},
		{
			name: "grants that do not name their nodes pass over the stopped ones",
			faults: func(b *builder) {
				b.Nemesis(20, history.NemClockJump, "redlock-3", "", "+20s")
			},
			unnamed: true,
			want:    "after redlock-3's clock jumped +20s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := func(names ...string) []string {
				if tt.unnamed {
					return nil
				}
				return names
			}
			b := newBuilder("unfenced")
			b.Nemesis(0, history.NemPause, "redlock-4", "", "").Nemesis(0, history.NemPause, "redlock-5", "", "")
			b.AcquireOn(0, 1, 10, nodes("redlock-1", "redlock-2", "redlock-3")...)
			tt.faults(b)
			b.Nemesis(25, history.NemKill, "redlock-4", "", "").Nemesis(25, history.NemKill, "redlock-5", "", "")
			b.Nemesis(30, history.NemStart, "redlock-4", "", "").Nemesis(30, history.NemStart, "redlock-5", "", "")
			b.AcquireOn(1, 35, 36, nodes("redlock-3", "redlock-4", "redlock-5")...)
			b.Release(0, 50, 51).Release(1, 60, 61)
			r := check(t, b)
			require.Equal(t, 1, r.Checks.LeaseSafety.Violations)
			assert.Equal(t, nodes("redlock-3", "redlock-4", "redlock-5"), r.Checks.LeaseSafety.Evidence[0].Later.Nodes)
			if tt.unnamed {
				assert.Contains(t, r.Reason, "c1 was granted lock-0 at 0.04s while c0's lease was certainly live")
			} else {
				assert.Contains(t, r.Reason, "c1 was granted lock-0 on redlock-3, redlock-4 and redlock-5 at 0.04s "+
					"while c0's lease on redlock-1, redlock-2 and redlock-3 was certainly live")
			}
			assert.Contains(t, r.Reason, tt.want)
		})
	}
}
