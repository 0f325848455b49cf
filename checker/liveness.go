package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/lockcheck/lockcheck/history"
)

// killLead is how long before a stall a kill at a failpoint still explains
// it: the stall starts at the previous grant, the kill lands during the
// victim's acquire.
const killLead = 1e9

// failpointWords says in words where a known failpoint sits and what a kill
// there leaves behind.
var failpointWords = map[string]struct{ where, leaves string }{
	"setnx-expire-gap": {"between SETNX and EXPIRE", "the lock key was left with no TTL"},
}

// checkLiveness measures how the lock served its clients: grants, acquire
// latency, and the longest stretch with no grant on a key while some
// acquire on it was in flight (each key's stalls were measured as it was
// settled).
func checkLiveness(f *facts, latencies []int64) Liveness {
	res := Liveness{AcquireFailed: f.acquireFailed, AcquireRefused: f.acquireRefused, AcquireUnknown: f.acquireUnknown,
		AcquireAttempts: f.acquireAttempts, Grants: len(latencies)}
	if secs := float64(f.span.End-f.span.Start) / 1e9; secs > 0 {
		res.GrantsPerSec = float64(res.Grants) / secs
	}
	if len(latencies) > 0 {
		slices.Sort(latencies)
		res.AcquireP50Ms = ms(percentile(latencies, 0.50))
		res.AcquireP99Ms = ms(percentile(latencies, 0.99))
		res.AcquireMaxMs = ms(latencies[len(latencies)-1])
	}
	var stalled *keyFacts
	for _, k := range f.keys {
		st := &k.settled.stalls
		// A working lock is granted again within a lease of its last
		// holder's end, so a final gap is "stuck" only when it outlasts
		// every lease the key promised twice over; a run that merely ended
		// (or was interrupted) between two grants is not stuck.
		stuck := st.stuck && st.longest.End-st.longest.Start > 2*st.longestLease
		if st.found && ms(st.longest.End-st.longest.Start) > res.LongestStallMs {
			stall := st.longest
			res.LongestStallMs = ms(stall.End - stall.Start)
			res.Stall, res.StuckUntilEnd, res.StallKey = &stall, stuck, k.key
			stalled = k
		}
	}
	if res.Stall != nil {
		res.StallReason = stallReason(f, stalled.key, stalled.settled.stalls.holder, *res.Stall, res.StuckUntilEnd)
	}
	return res
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []int64, p float64) int64 {
	rank := int(math.Ceil(p * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// stalls follows the gaps between consecutive grants on a key (counting
// from the start of the history to the first grant and from the last grant
// to its end) during which an acquire was in flight, one settled stretch
// at a time, keeping the longest.
type stalls struct {
	from    int64 // the last grant settled so far, or the start
	started bool
	// fromHolder is the latest settled grant still believed just after
	// from: who held the key as a gap from there began.
	fromHolder *Grant

	longest      Interval
	found, stuck bool // stuck: the longest is the gap that runs to the end
	holder       *Grant
	longestLease int64 // the longest lease, in ns, any grant on the key promised
}

// settle measures the gaps up to each of grants (a stretch of the key's,
// all granted after the grants settled before) with attempts, the acquires
// that may still be in flight in them; with final, also the gap from the
// last grant to end. It returns the moment from which attempts still
// matter: one that ended before it is in no later gap.
func (st *stalls) settle(grants []Grant, attempts []attempt, start, end int64, final bool) int64 {
	if !st.started {
		st.from, st.started = start, true
	}
	oks := make([]int64, 0, len(grants)+1)
	for _, g := range grants {
		oks = append(oks, g.OK)
		st.longestLease = max(st.longestLease, g.TTLms*1e6)
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
	for i, to := range oks {
		if to-st.from > st.longest.End-st.longest.Start && trying(st.from, to) {
			st.longest, st.stuck, st.found = Interval{Start: st.from, End: to}, final && i == len(oks)-1, true
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
		if why := stallFault(f.faults, holder, stall); why != "" {
			parts = append(parts, fmt.Sprintf("nobody was granted %s for %s from %s %s",
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

// stallFault says which fault in force during a stall explains it best:
// "while c0, paused, held its lease" when holder, the client holding the
// key as the stall began, was paused during it, else the first fault in
// force; empty when there was none.
func stallFault(faults []Fault, holder *Grant, stall Interval) string {
	in := faultsDuring(faults, stall.Start, stall.End)
	if len(in) == 0 {
		return ""
	}
	if holder != nil {
		for _, f := range in {
			if f.Kind == history.NemPause && f.Target == holder.Process.String() && f.Start < holder.BeliefEnd {
				return "while " + f.Target + ", paused, held its lease"
			}
		}
	}
	return faultPhrase(in[0])
}

// Liveness: how the lock served its clients.
type Liveness struct {
	Grants         int     `json:"grants"`
	GrantsPerSec   float64 `json:"grants_per_sec"`
	LongestStallMs float64 `json:"longest_stall_ms"`
	// Stall is the longest stretch with no grant while clients were trying.
	Stall *Interval `json:"stall,omitempty"`
	// StuckUntilEnd is set when that stretch lasted to the end of the run.
	StuckUntilEnd   bool    `json:"stuck_until_end"`
	StallReason     string  `json:"stall_reason,omitempty"`
	StallKey        string  `json:"stall_key,omitempty"` // the key nobody got during the stall
	AcquireP50Ms    float64 `json:"acquire_p50_ms"`
	AcquireP99Ms    float64 `json:"acquire_p99_ms"`
	AcquireMaxMs    float64 `json:"acquire_max_ms"`
	AcquireAttempts int     `json:"acquire_attempts"`
	AcquireFailed   int     `json:"acquire_failed"`  // the lock was busy
	AcquireRefused  int     `json:"acquire_refused"` // the service would not write at all (NOREPLICAS, READONLY)
	AcquireUnknown  int     `json:"acquire_unknown"`
}

// Judge never fails liveness: the verdict is about safety. A lock stuck
// until the end of the run is a notice, with the checker's explanation.
func (l *Liveness) Judge(c JudgeContext) Judgement {
	if !l.StuckUntilEnd {
		return Judgement{Status: StatusOK}
	}
	msg := "The lock was stuck until the end of the run"
	if l.Stall != nil {
		msg += fmt.Sprintf(" from %.3f s", float64(l.Stall.Start-c.T0)/1e9)
	}
	if l.StallReason != "" {
		msg += ": " + l.StallReason
	}
	return Judgement{StatusNotice, strings.TrimSuffix(msg, ".") + "."}
}
