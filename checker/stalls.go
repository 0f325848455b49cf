package checker

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lockcheck/lockcheck/history"
)

// stalls follows the gaps between consecutive grants on a key (counting
// from the key's first acquire to its first grant and from the last grant
// to the end of the history) during which an acquire was in flight, one
// settled stretch at a time, keeping the longest. A client's start-up
// before it first asks is no stall.
type stalls struct {
	from    int64 // the last grant settled so far, or the key's first acquire
	started bool
	// fromHolder is the latest settled grant still believed just after
	// from: who held the key as a gap from there began.
	fromHolder *Grant

	longest Interval
	found   bool
	holder  *Grant
}

// settle measures the gaps up to each of grants (a stretch of the key's,
// all granted after the grants settled before) with attempts, the acquires
// that may still be in flight in them; with final, also the gap from the
// last grant to end. It returns the moment from which attempts still
// matter: one that ended before it is in no later gap.
func (st *stalls) settle(grants []Grant, attempts []attempt, start, end int64, final bool) int64 {
	if !st.started {
		if len(attempts) == 0 {
			return start // nobody asked for the key yet
		}
		st.from, st.started = attempts[0].invoke, true
		for _, a := range attempts {
			st.from = min(st.from, a.invoke)
		}
	}
	oks := make([]int64, 0, len(grants)+1)
	for _, g := range grants {
		oks = append(oks, g.OK)
	}
	slices.Sort(oks)
	attempts = slices.Clone(attempts)
	slices.SortFunc(attempts, func(a, b attempt) int { return cmp.Compare(a.invoke, b.invoke) })
	// latestEnd[i] is the latest end among attempts[:i+1].
	latestEnd := make([]int64, len(attempts))
	for i, a := range attempts {
		latestEnd[i] = a.end
		if i > 0 {
			latestEnd[i] = max(a.end, latestEnd[i-1])
		}
	}
	trying := func(from, to int64) bool {
		n := sort.Search(len(attempts), func(i int) bool { return attempts[i].invoke >= to })
		return n > 0 && latestEnd[n-1] > from
	}
	if final {
		oks = append(oks, end)
	}
	for _, to := range oks {
		if to-st.from > st.longest.End-st.longest.Start && trying(st.from, to) {
			st.longest, st.found = Interval{Start: st.from, End: to}, true
			st.holder = holderAt(grants, st.fromHolder, st.from)
		}
		st.from = max(st.from, to)
	}
	st.fromHolder = holderAt(grants, st.fromHolder, st.from)
	return st.from
}

// holderAt is the latest grant, among grants and the earlier settled one
// before, that began by t and was still believed just after it: the client
// holding the key as a stall from t began; nil when there was none.
func holderAt(grants []Grant, before *Grant, t int64) *Grant {
	var holder *Grant
	if before != nil && before.OK <= t && before.BeliefEnd > t {
		holder = before
	}
	for i := range grants {
		g := &grants[i]
		if g.OK <= t && g.BeliefEnd > t && (holder == nil || g.OK > holder.OK) {
			c := *g
			holder = &c
		}
	}
	return holder
}

// stallReason explains a stall in plain words when the history says why: a
// client killed at a failpoint just before or during it, a fault in force
// during it, and, for a lock stuck until the end of the run only, what the
// nemesis saw when it inspected the lock service then. A stall that ended
// with no fault in force has no reason.
func stallReason(f *facts, key string, holder *Grant, stall Interval, stuck bool) string {
	var parts []string
	var kill *history.Event
	for _, e := range f.nemesis {
		if e.F == history.NemKill && e.Value != nil && e.Value.Failpoint != "" &&
			e.Time >= stall.Start-killLead && e.Time <= stall.End {
			kill = e
		}
	}
	switch {
	case kill != nil:
		fp := kill.Value.Failpoint
		words, known := failpointWords[fp]
		where := "at failpoint " + fp
		if known {
			where = words.where
		}
		s := fmt.Sprintf("%s was killed %s at %s", kill.Value.Target, where, relSeconds(kill.Time-f.span.Start))
		nobody := "nobody got the lock for " + lasting(stall.End-max(kill.Time, stall.Start))
		if stuck {
			nobody = "nobody got the lock for the remaining " + lasting(stall.End-kill.Time)
		}
		if known {
			s += "; " + words.leaves + " and " + nobody
		} else {
			s += "; " + nobody
		}
		parts = append(parts, s)
	case stuck:
		parts = append(parts, fmt.Sprintf("nobody got the lock from %s to the end of the run although clients kept trying",
			relSeconds(stall.Start-f.span.Start)))
	default:
		if why := stallFault(f.faults, holder, stall, f.span.Start); why != "" {
			parts = append(parts, fmt.Sprintf("nobody was granted %s for %s from %s%s",
				key, lasting(stall.End-stall.Start), relSeconds(stall.Start-f.span.Start), why))
		}
	}
	if stuck {
		for _, e := range f.nemesis {
			if e.F == history.NemInspect && e.Value != nil && e.Value.Detail != "" {
				parts = append(parts, "at the end of the run: "+e.Value.Detail)
			}
		}
	}
	return strings.Join(parts, "; ")
}

// stallFault says which fault in force during a stall explains it best,
// as the rest of a sentence: when holder, the client holding the key as the
// stall began, was paused during it, "; c0's 500 ms lease ended at 1.0s
// while c0 was paused" for a lease with a TTL that the pause outlasted
// during the stall, else " while c0, paused, held its lease"; otherwise the
// first fault in force; empty when there was none. t0 is the history's
// start.
func stallFault(faults []Fault, holder *Grant, stall Interval, t0 int64) string {
	in := faultsDuring(faults, stall.Start, stall.End)
	if len(in) == 0 {
		return ""
	}
	if holder != nil {
		who := holder.Process.String()
		if holder.TTLms > 0 {
			cover := newFaultCover(faults, never)
			if end, _, found := cover.pausedEnd(holder.Process, holder.OK, holder.BeliefEnd, holder.TTLms); found && end < stall.End {
				return "; " + pausedLease(who, holder.TTLms, relSeconds(end-t0))
			}
		}
		for _, f := range in {
			if f.Kind == history.NemPause && f.Target == who && f.Start < holder.BeliefEnd {
				return " while " + who + ", paused, held its lease"
			}
		}
	}
	return " " + faultPhrase(in[0])
}
