package checker

import (
	"cmp"
	"slices"

	"github.com/lockcheck/lockcheck/history"
)

// Belief is one client's belief that it held a key, as the checks read it
// (docs/history.md, "Belief"): from its grant's ok until it invoked
// release, retired, was killed, or the history ended. LetGo is when the
// service certainly let the lease go while the client still believed in
// it, 0 when the history shows no such moment: a lease with a TTL that its
// holder's pause outlasted (one TTL into the pause), or a lock that lived
// on a session that ended (a kill-session, its node killed). A lease kept
// alive by its library's own renewals (etcd's keepalive, a ZooKeeper
// session's heartbeats), which the history does not show, is not taken as
// let go at its TTL.
type Belief struct {
	Key        string
	Process    history.Process
	Fence      *int64
	Start, End int64
	LetGo      int64
}

// Beliefs reads h once, as the checks do, and returns every belief in it,
// by start: what the report draws.
func Beliefs(h *history.History) []Belief {
	f := scan(h, HistoryClockAllowance(h.Header))
	cover := newFaultCover(f.faults, never)
	var out []Belief
	for _, k := range f.keys {
		for _, g := range k.grants {
			b := Belief{Key: g.Key, Process: g.Process, Fence: g.Fence, Start: g.OK, End: g.BeliefEnd}
			switch {
			case g.TTLms > 0:
				if at, _, found := cover.pausedEnd(g.Process, g.OK, g.BeliefEnd, g.TTLms); found && at < g.BeliefEnd {
					b.LetGo = at
				}
			case g.CertainEnd < g.BeliefEnd:
				b.LetGo = max(g.OK, g.CertainEnd) // its session ended first
			}
			out = append(out, b)
		}
	}
	slices.SortStableFunc(out, func(a, b Belief) int { return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Process, b.Process)) })
	return out
}
