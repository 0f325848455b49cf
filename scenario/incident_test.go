package scenario

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// kleppmann is a run of a minimal Redlock scenario: c1 won redlock-1,
// redlock-3 and redlock-4 (a bare majority of five), redlock-3's clock
// jumped and c0 won redlock-2, redlock-3 and redlock-5 within c1's lease.
func kleppmann() *checker.Result {
	sec := int64(time.Second)
	v := checker.LeaseViolation{
		Key:     "lock-0",
		Earlier: checker.Grant{Process: 1, Invoke: 1 * sec, OK: 1*sec + 10, CertainEnd: 2 * sec, Nodes: []string{"redlock-1", "redlock-3", "redlock-4"}},
		Later:   checker.Grant{Process: 0, Invoke: 1*sec + sec/4, OK: 1*sec + sec/3, Nodes: []string{"redlock-2", "redlock-3", "redlock-5"}},
	}
	res := &checker.Result{Valid: checker.Invalid, Reason: "c0 was granted lock-0 while c1's lease was certainly live."}
	res.Faults = []checker.Fault{
		{Kind: history.NemPause, Target: "redlock-2", Start: sec / 2, End: sec + sec/5, Step: history.Int(1), Landed: true},
		{Kind: history.NemClockJump, Target: "redlock-3", Detail: "+20s", Start: sec + sec/10, End: 2 * sec, Step: history.Int(1), Landed: true},
	}
	res.Checks.LeaseSafety.Evidence = []checker.LeaseViolation{v}
	return res
}

func TestIncidentTellsWhatIsLeft(t *testing.T) {
	ms := func(n int) Duration { return Duration(time.Duration(n) * time.Millisecond) }
	tests := []struct {
		name string
		f    File
		res  *checker.Result
		want []string
	}{
		{
			name: "a holder paused past its lease right after its lease check",
			f: File{Backend: "redis", TTL: ms(500), Timeline: []Step{
				{At: ms(300), When: &When{Client: "c0", Reaches: "before-write"}, Do: "pause", Target: "c0", For: ms(1000)},
			}},
			want: []string{"The timeline is one pause of c0 for 1s when it reaches before-write (right after its lease check, before its write), longer than its 500ms lease."},
		},
		{
			name: "a holder paused as long as its lease",
			f: File{Backend: "redis", TTL: ms(500), Timeline: []Step{
				{At: ms(188), When: &When{Client: "c0", Reaches: "before-write"}, Do: "pause", Target: "c0", For: ms(500)},
			}},
			want: []string{"one pause of c0 for 500ms when it reaches before-write (right after its lease check, before its write), as long as its 500ms lease."},
		},
		{
			name: "Kleppmann's clock jump on a node of a bare majority",
			f:    File{Backend: "redlock", TTL: ms(500), Timeline: []Step{{At: 0, Do: "fault", Fault: "clock-pause"}}},
			res:  kleppmann(),
			want: []string{
				"The timeline is one clock-pause fault (Kleppmann's Redlock case",
				"In a run of it, that was one clock jump of +20s on redlock-3 while c1 held the lock on a bare majority (redlock-1, redlock-3 and redlock-4), and c0 was granted it within that lease.",
				"That run's verdict: c0 was granted lock-0 while c1's lease was certainly live.",
			},
		},
		{
			name: "steps at times, with their articles",
			f: File{Backend: "redlock", TTL: ms(500), Timeline: []Step{
				{At: ms(1000), Do: "clock", Target: "redlock-3", Offset: ms(-2000)},
				{At: ms(1500), Do: "restart", Target: "redlock-1", Wipe: true},
				{At: ms(2000), Do: "pause", Target: "c1", For: ms(100)},
			}},
			want: []string{"The timeline is three steps: a clock jump of -2s on redlock-3 at 1s, a restart of redlock-1 with its data wiped at 1.5s and a pause of c1 for 100ms at 2s."},
		},
		{
			name: "steps alike but for their times are said once",
			f: File{Backend: "redlock", TTL: ms(500), Timeline: []Step{
				{At: ms(178), Do: "fault", Fault: "clock-pause"},
				{At: ms(1713), Do: "fault", Fault: "clock-pause"},
				{At: ms(2000), When: &When{Client: "c1", Reaches: "before-write"}, Do: "pause", Target: "c1", For: ms(1000)},
				{At: ms(3000), When: &When{Client: "c1", Reaches: "before-write"}, Do: "pause", Target: "c1", For: ms(1000)},
			}},
			want: []string{"The timeline is four steps: a clock-pause fault (Kleppmann's Redlock case",
				"let a second client win it), two times at 178ms and 1.713s and a pause of c1 for 1s when it reaches before-write (right after its lease check, before its write), longer than its 500ms lease, two times."},
		},
		{
			name: "no fault left",
			f:    File{Backend: "redis", TTL: ms(500)},
			want: []string{"The timeline has no fault at all."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.f.Incident(tt.res)
			for _, w := range tt.want {
				assert.Contains(t, got, w)
			}
		})
	}
}

func TestIncidentOfALeaseOnMoreThanAMajority(t *testing.T) {
	res := kleppmann()
	v := &res.Checks.LeaseSafety.Evidence[0]
	v.Earlier.Nodes = append(v.Earlier.Nodes, "redlock-5")
	f := File{Backend: "redlock", TTL: Duration(500 * time.Millisecond), Timeline: []Step{{Do: "fault", Fault: "clock-pause"}}}
	got := f.Incident(res)
	require.NotContains(t, got, "held the lock on a bare majority")
	assert.Contains(t, got, "while c1 held the lock on 4 of 5 nodes (redlock-1, redlock-3, redlock-4 and redlock-5)")
}
