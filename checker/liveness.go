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
// latency, and the longest stretch with no grant on a key while some acquire
// on it was in flight.
func checkLiveness(f *facts) Liveness {
	res := Liveness{AcquireFailed: f.acquireFailed, AcquireRefused: f.acquireRefused, AcquireUnknown: f.acquireUnknown}
	var latencies []int64
	for _, k := range f.keys {
		res.AcquireAttempts += len(k.attempts)
		for _, g := range k.grants {
			latencies = append(latencies, g.OK-g.Invoke)
		}
	}
	res.Grants = len(latencies)
	if secs := float64(f.span.End-f.span.Start) / 1e9; secs > 0 {
		res.GrantsPerSec = float64(res.Grants) / secs
	}
	if len(latencies) > 0 {
		slices.Sort(latencies)
		res.AcquireP50Ms = ms(percentile(latencies, 0.50))
		res.AcquireP99Ms = ms(percentile(latencies, 0.99))
		res.AcquireMaxMs = ms(latencies[len(latencies)-1])
	}

	end := f.span.End
	if f.hasRunEnd {
		end = f.runEnd
	}
	var stalled *keyFacts
	for _, k := range f.keys {
		stall, stuck, ok := longestStall(k, f.span.Start, end)
		// A working lock is granted again within a lease of its last
		// holder's end, so a final gap is "stuck" only when it outlasts
		// every lease the key promised twice over; a run that merely ended
		// (or was interrupted) between two grants is not stuck.
		stuck = stuck && stall.End-stall.Start > 2*longestLease(k)
		if ok && ms(stall.End-stall.Start) > res.LongestStallMs {
			res.LongestStallMs = ms(stall.End - stall.Start)
			res.Stall, res.StuckUntilEnd, res.StallKey = &stall, stuck, k.key
			stalled = k
		}
	}
	if res.Stall != nil {
		res.StallReason = stallReason(f, stalled, *res.Stall, res.StuckUntilEnd)
	}
	return res
}

// longestLease is the longest lease, in ns, any grant on k promised.
func longestLease(k *keyFacts) int64 {
	var longest int64
	for _, g := range k.grants {
		longest = max(longest, g.TTLms*1e6)
	}
	return longest
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []int64, p float64) int64 {
	rank := int(math.Ceil(p * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// longestStall finds the longest gap between consecutive grants on k
// (counting from start to the first grant and from the last grant to end)
// during which an acquire was in flight. stuck reports that it is the gap
// that runs to the end.
func longestStall(k *keyFacts, start, end int64) (stall Interval, stuck, ok bool) {
	oks := make([]int64, 0, len(k.grants)+1)
	for _, g := range k.grants {
		oks = append(oks, g.OK)
	}
	slices.Sort(oks)
	attempts := slices.Clone(k.attempts)
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
	from := start
	for i, to := range append(oks, end) {
		last := i == len(oks)
		if to-from > stall.End-stall.Start && trying(from, to) {
			stall, stuck, ok = Interval{Start: from, End: to}, last, true
		}
		from = max(from, to)
	}
	return stall, stuck, ok
}

// stallReason explains a stall in plain words when the history says why: a
// client killed at a failpoint just before or during it, a fault in force
// during it, and, for a lock stuck until the end of the run only, what the
// nemesis saw when it inspected the lock service then. A stall that ended
// with no fault in force has no reason.
func stallReason(f *facts, k *keyFacts, stall Interval, stuck bool) string {
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
		if why := stallFault(f.faults, k, stall); why != "" {
			parts = append(parts, fmt.Sprintf("nobody was granted %s for %s from %s %s",
				k.key, lasting(stall.End-stall.Start), relSeconds(stall.Start-f.span.Start), why))
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

// stallFault says which fault in force during a stall on k explains it best:
// "while c0, paused, held its lease" when the client holding k as the stall
// began was paused during it, else the first fault in force; empty when
// there was none.
func stallFault(faults []Fault, k *keyFacts, stall Interval) string {
	in := faultsDuring(faults, stall.Start, stall.End)
	if len(in) == 0 {
		return ""
	}
	// The holder is the latest grant on k that began by the stall's start
	// and was still believed in just after it.
	var holder *Grant
	for i := range k.grants {
		g := &k.grants[i]
		if g.OK <= stall.Start && g.BeliefEnd > stall.Start && (holder == nil || g.OK > holder.OK) {
			holder = g
		}
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
