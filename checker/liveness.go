package checker

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

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
// latency, the longest stretch with no grant on a key while some acquire
// on it was in flight, and the stretches in which a key was orphaned (each
// key's stalls and orphans were found as it was settled).
func checkLiveness(f *facts, latencies []int64) Liveness {
	res := Liveness{AcquireFailed: f.acquireFailed, AcquireRefused: f.acquireRefused, AcquireNotSent: f.acquireNotSent, AcquireUnknown: f.acquireUnknown,
		AcquireAttempts: f.acquireAttempts, Grants: len(latencies),
		AcquireNoFault: f.quiet.n, AcquireNoFaultUnanswered: f.quiet.unanswered, AcquireErrors: errorsOf(&f.quiet, f.span.Start)}
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
		if st.found && ms(st.longest.End-st.longest.Start) > res.LongestStallMs {
			stall := st.longest
			res.LongestStallMs = ms(stall.End - stall.Start)
			res.Stall, res.StallKey = &stall, k.key
			stalled = k
		}
		o := &k.settled.orphans
		res.Orphaned += o.count
		for _, found := range o.found {
			if len(res.Orphans) < maxEvidence {
				found.Reason = orphanReason(f, found)
				res.Orphans = append(res.Orphans, found.Orphan)
			}
			res.StuckUntilEnd = res.StuckUntilEnd || found.UntilEnd
		}
	}
	if res.Stall != nil {
		// The longest stall is the lock stuck for good when an orphaned
		// stretch of its key ran to the end of the run with it.
		stuck := slices.ContainsFunc(res.Orphans, func(o Orphan) bool {
			return o.UntilEnd && o.Key == stalled.key && o.To == res.Stall.End
		})
		res.StallReason = stallReason(f, stalled.key, stalled.settled.stalls.holder, *res.Stall, stuck)
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

// Liveness: how the lock served its clients.
type Liveness struct {
	Grants         int     `json:"grants"`
	GrantsPerSec   float64 `json:"grants_per_sec"`
	LongestStallMs float64 `json:"longest_stall_ms"`
	// Stall is the longest stretch with no grant while clients were trying.
	Stall *Interval `json:"stall,omitempty"`
	// StuckUntilEnd is set when a key was orphaned until the end of the
	// run: nobody held it and every client that asked was refused.
	StuckUntilEnd   bool    `json:"stuck_until_end"`
	StallReason     string  `json:"stall_reason,omitempty"`
	StallKey        string  `json:"stall_key,omitempty"` // the key nobody got during the stall
	AcquireP50Ms    float64 `json:"acquire_p50_ms"`
	AcquireP99Ms    float64 `json:"acquire_p99_ms"`
	AcquireMaxMs    float64 `json:"acquire_max_ms"`
	AcquireAttempts int     `json:"acquire_attempts"`
	AcquireFailed   int     `json:"acquire_failed"`  // the lock was busy
	AcquireRefused  int     `json:"acquire_refused"` // the service would not write at all (NOREPLICAS, READONLY)
	// AcquireNotSent counts the acquires the client refused itself,
	// sending nothing to the service (a program's error 41: not
	// connected); the service refused none of them.
	AcquireNotSent int `json:"acquire_not_sent"`
	AcquireUnknown int `json:"acquire_unknown"`
	// AcquireNoFault counts the acquires made while no fault on a node, or
	// on their own client, was in force, and AcquireNoFaultUnanswered those
	// of them that ended in an error or an unknown outcome; more than half
	// makes a run's verdict unknown (runstate.go).
	AcquireNoFault           int `json:"acquire_no_fault"`
	AcquireNoFaultUnanswered int `json:"acquire_no_fault_unanswered"`
	// AcquireErrors are the commonest errors of those, by kind.
	AcquireErrors []AcquireError `json:"acquire_errors,omitempty"`
	// Orphaned counts the stretches in which a key was orphaned: nobody
	// held it, yet the service refused every client that asked, for
	// longer than the orphan bound (docs/history.md, "Orphaned locks").
	Orphaned int `json:"orphaned"`
	// Orphans are the first maxEvidence of them.
	Orphans []Orphan `json:"orphans,omitempty"`
}

// Orphan is one stretch in which a key was orphaned.
type Orphan struct {
	Key string `json:"key"`
	// From is when the last claim on the key before it ended (the
	// history's start when there was none), To when the next one began,
	// or the end of the run (UntilEnd).
	From     int64 `json:"from"`
	To       int64 `json:"to"`
	UntilEnd bool  `json:"until_end"`
	// FirstRefused is the answer of the first acquire refused in it,
	// LastRefused the invoke of the last, Refused how many were.
	FirstRefused int64 `json:"first_refused"`
	LastRefused  int64 `json:"last_refused"`
	Refused      int   `json:"refused"`
	// BoundMs is the orphan bound it outlasted: twice the TTL and a
	// second.
	BoundMs float64 `json:"bound_ms"`
	// Holder is the process of the last claim before it, if any.
	Holder *history.Process `json:"holder,omitempty"`
	// Reason says in words what held the key and since when.
	Reason string `json:"reason"`
}

// Judge fails liveness when a key was orphaned: a lock that nobody holds
// and nobody can take is broken, as surely as one granted twice.
func (l *Liveness) Judge(JudgeContext) Judgement {
	if l.Orphaned == 0 {
		return Judgement{Status: StatusOK}
	}
	msg := "The lock was orphaned"
	if len(l.Orphans) > 0 {
		msg += ": " + l.Orphans[0].Reason
	}
	if l.Orphaned > 1 {
		msg += fmt.Sprintf(" (%d orphaned stretches in all)", l.Orphaned)
	}
	return Judgement{StatusFailed, strings.TrimSuffix(msg, ".") + "."}
}

// The orphaned-lock rule (docs/history.md, "Orphaned locks"). Every grant,
// and every acquire whose outcome is unknown (it may have been granted),
// gives its key a claim: from the acquire's invoke to the moment the
// service certainly had nothing left to free on its behalf (claimEnd, kept
// by the scan; for a lease with a TTL whose holder was paused past it, one
// TTL into the pause), prolonged while a fault on a node is in force then
// (a server cannot expire anything while it is stopped), and, for a lock
// that lasts until release, while a fault on the claim's own client is (a
// server cannot let go of a session it cannot see end). An acquire refused as
// busy that no claim overlaps is unexplained; the key is orphaned when two
// unexplained refusals, with no claim between them, lie more than the
// bound apart: from the first one's answer to the last one's invoke.
//
// The sweep reads the key's claims by their start and its refusals by
// their invoke and answer, a stretch at a time as the key is settled,
// keeping only where the claims so far end and what the refusals since
// then add up to.

// orphanBound is how long, past every claim, the service may refuse a key
// before it counts as orphaned, for claims whose largest TTL is ttlMs: one
// TTL for a service that restarts its lease clocks when its leader changes
// (etcd refreshes every lease on a new leader, ZooKeeper every session),
// one for a renewal that was still on its way when its holder stopped, and
// a second for the service's own expiry ticks and a busy machine. A lock
// without a TTL frees a lock when its session ends, which a server learns
// at once from the closed connection: the second alone.
func orphanBound(ttlMs int64) int64 { return 2*ttlMs*1e6 + 1e9 }

// orphanSweep is what the rule keeps of a key between its stretches.
type orphanSweep struct {
	// cover is the latest end of the claims swept so far, and coverBy the
	// claim that ends there (nil before the first claim).
	cover   int64
	coverBy *claimBy
	// open are claims that last until a fault heals: while there is one,
	// the key is claimed.
	open []claimBy
	// ttl is the largest TTL, ms, of the claims swept so far.
	ttl int64
	// gap are the unexplained refusals since cover.
	gap gapRefusals
	// count and found are the orphaned stretches (the first maxEvidence).
	count int
	found []orphanFound
}

// claimBy is who made a claim, from when, and how it ended, for the reason.
type claimBy struct {
	start   int64
	process history.Process
	outcome attemptOutcome
	ttl     int64
	end     claimEnd
	// ok and beliefEnd are, for a grant, its ok and when its holder
	// stopped believing (never: not before the history ended).
	ok, beliefEnd int64
}

// gapRefusals sums up the unexplained refusals of one gap between claims.
type gapRefusals struct {
	n                     int
	firstDone, lastInvoke int64
}

func (g *gapRefusals) add(invoke, done int64) {
	if g.n == 0 {
		g.firstDone, g.lastInvoke = done, invoke
	}
	g.n++
	g.firstDone, g.lastInvoke = min(g.firstDone, done), max(g.lastInvoke, invoke)
}

// orphanFound is an orphaned stretch, with the claim before it for its
// reason.
type orphanFound struct {
	Orphan
	by *claimBy
}

// faultCover is the faults that prolong a claim: those on a node (merged
// into disjoint stretches) and those on each client, and each client's
// pauses, which end a lease with a TTL, as far as the scan has read (up to
// known; never at the end of the history).
type faultCover struct {
	nodes   []Interval
	clients map[string][]Interval
	pauses  map[string][]Interval
	known   int64
}

// newFaultCover reads faults, known up to known; one that has not healed
// yet ends never.
func newFaultCover(faults []Fault, known int64) faultCover {
	c := faultCover{clients: map[string][]Interval{}, pauses: map[string][]Interval{}, known: known}
	for _, f := range faults {
		if f.End <= f.Start {
			continue // a point prolongs nothing
		}
		iv := Interval{Start: f.Start, End: f.End}
		switch {
		case !onClient(f.Target):
			c.nodes = append(c.nodes, iv)
		case f.Kind == history.NemPause:
			c.pauses[f.Target] = append(c.pauses[f.Target], iv)
			fallthrough
		default:
			c.clients[f.Target] = append(c.clients[f.Target], iv)
		}
	}
	c.nodes = mergeIntervals(c.nodes)
	for t, ivs := range c.clients {
		c.clients[t] = mergeIntervals(ivs)
	}
	for t, ivs := range c.pauses {
		c.pauses[t] = mergeIntervals(ivs)
	}
	return c
}

// pausedEnd is when a lease with a TTL of ttlMs, granted at ok and
// believed by its holder p until beliefEnd, certainly ended because p was
// paused: one TTL after the first pause of p within the belief (or after
// ok, when that is later) that outlasted it, and that pause's start (or
// ok). A stopped client renews nothing, and a service expires a lease with
// a TTL whatever its holder believes; a renewal already on its way when
// the pause began is what the orphan bound's second TTL is for. found is
// false when no pause known up to c.known outlasted the lease.
func (c faultCover) pausedEnd(p history.Process, ok, beliefEnd, ttlMs int64) (end, paused int64, found bool) {
	for _, iv := range c.pauses[p.String()] {
		if iv.Start >= beliefEnd || iv.End <= ok {
			continue
		}
		from := max(ok, iv.Start)
		_, end := history.LeaseEnds(from, from, time.Duration(ttlMs)*time.Millisecond, 0)
		if iv.End > end && end < c.known {
			return end, from, true
		}
	}
	return 0, 0, false
}

// ends is where claim by ends once every fault that prolongs it has healed
// (never while one has not: see prolong). A lease with a TTL that its
// holder's pause outlasted ends one TTL into the pause, as by.end then
// says; only faults on nodes prolong it. A lock that lasts until release
// is prolonged by faults on its own client too: a server cannot let go of
// a session it cannot see end.
func (c faultCover) ends(by *claimBy) int64 {
	if by.outcome == attemptGranted && by.ttl > 0 {
		if at, paused, found := c.pausedEnd(by.process, by.ok, by.beliefEnd, by.ttl); found && at < by.end.at {
			by.end = claimEnd{at: at, how: endedWhilePaused, event: paused}
		}
	}
	return c.prolong(by.end.at, by.process, by.ttl <= 0)
}

// mergeIntervals sorts ivs and merges those that touch.
func mergeIntervals(ivs []Interval) []Interval {
	slices.SortFunc(ivs, func(a, b Interval) int { return cmp.Compare(a.Start, b.Start) })
	var out []Interval
	for _, iv := range ivs {
		if n := len(out); n > 0 && iv.Start <= out[n-1].End {
			out[n-1].End = max(out[n-1].End, iv.End)
			continue
		}
		out = append(out, iv)
	}
	return out
}

// prolong is the end of a claim of process p that would end at t, once
// every fault on a node (and, with own, on p) in force at that moment has
// healed; never while one has not, or while that end lies beyond what the
// scan has read (a fault the scan has not read yet may still prolong it).
func (c faultCover) prolong(t int64, p history.Process, own bool) int64 {
	within := func(ivs []Interval) (int64, bool) {
		i := sort.Search(len(ivs), func(i int) bool { return ivs[i].End >= t })
		if i < len(ivs) && ivs[i].Start <= t && ivs[i].End > t {
			return ivs[i].End, true
		}
		return t, false
	}
	var mine []Interval
	if own {
		mine = c.clients[p.String()]
	}
	for t != never {
		var moved bool
		if end, ok := within(c.nodes); ok {
			t, moved = end, true
		}
		if end, ok := within(mine); ok {
			t, moved = end, true
		}
		if !moved {
			break
		}
	}
	if t >= c.known {
		return never
	}
	return t
}

// sweepEvent is one moment the sweep reads: a claim's start, a refusal's
// invoke or its answer (in that order at one instant: a claim that begins
// as a refusal is answered overlaps it).
type sweepEvent struct {
	at   int64
	kind int
	a    int // index in the attempts
}

const (
	claimStarts = iota
	refusalAsked
	refusalAnswered
)

// sweep reads the claims and refusals of attempts, the key's acquires that
// the scan holds, that are due: claims begun before horizon (every acquire
// invoked earlier has come out) and refusals answered before it (a claim
// begun later cannot overlap them); later ones wait for the next stretch,
// or the end (final, horizon never). faults prolong claims; start is the
// history's start, end the run's.
func (o *orphanSweep) sweep(key string, attempts []attempt, horizon int64, faults faultCover, start, end int64, final bool) {
	// Claims that waited for a fault to heal end where it healed.
	open := o.open[:0]
	for _, by := range o.open {
		if e := faults.ends(&by); e != never {
			o.raise(e, by)
		} else {
			open = append(open, by)
		}
	}
	o.open = open

	var events []sweepEvent
	for i := range attempts {
		a := &attempts[i]
		switch {
		case a.swept:
		case (a.outcome == attemptGranted || a.outcome == attemptUnknown) && a.invoke < horizon:
			events = append(events, sweepEvent{a.invoke, claimStarts, i})
			a.swept = true
		case a.outcome == attemptBusy && a.end < horizon:
			events = append(events, sweepEvent{a.invoke, refusalAsked, i}, sweepEvent{a.end, refusalAnswered, i})
			a.swept = true
		}
	}
	slices.SortFunc(events, func(x, y sweepEvent) int { return cmp.Or(cmp.Compare(x.at, y.at), cmp.Compare(x.kind, y.kind)) })
	tentative := map[int]bool{} // refusals asked in the gap, not answered yet
	for _, ev := range events {
		a := &attempts[ev.a]
		switch ev.kind {
		case claimStarts:
			if len(o.open) == 0 && (o.coverBy == nil || ev.at > o.cover) {
				clear(tentative) // this claim overlaps them
				o.close(key, start, ev.at, false)
			}
			by := claimBy{start: a.invoke, process: a.process, outcome: a.outcome, ttl: a.ttl, end: a.claim, ok: a.end, beliefEnd: a.beliefEnd}
			if !a.claimed {
				by.end = claimEnd{at: never, how: endedAtHistoryEnd, event: never}
				by.beliefEnd = never
			}
			o.ttl = max(o.ttl, a.ttl)
			if e := faults.ends(&by); e != never {
				o.raise(e, by)
			} else {
				o.open = append(o.open, by)
			}
		case refusalAsked:
			if len(o.open) == 0 && (o.coverBy == nil || ev.at > o.cover) {
				tentative[ev.a] = true
			}
		case refusalAnswered:
			if tentative[ev.a] {
				delete(tentative, ev.a)
				o.gap.add(a.invoke, a.end)
			}
		}
	}
	if final && len(o.open) == 0 {
		o.close(key, start, end, true)
	}
}

// raise records a claim that ends at e. Of claims that end at one moment
// (a fault that prolonged several heals), the one begun last, then of the
// highest process, is the one that ended there, whatever order the
// stretches brought them in.
func (o *orphanSweep) raise(e int64, by claimBy) {
	if c := o.coverBy; c == nil || e > o.cover || e == o.cover && cmp.Or(cmp.Compare(by.start, c.start), cmp.Compare(by.process, c.process)) > 0 {
		o.cover, o.coverBy = e, &by
	}
}

// close ends the gap since cover at to (the next claim's start, or the
// end of the run), and records it when its refusals outlasted the bound.
func (o *orphanSweep) close(key string, start, to int64, untilEnd bool) {
	g := o.gap
	o.gap = gapRefusals{}
	bound := orphanBound(o.ttl)
	if g.n == 0 || g.lastInvoke-g.firstDone <= bound {
		return
	}
	o.count++
	if len(o.found) == maxEvidence {
		return
	}
	from := start
	if o.coverBy != nil {
		from = max(start, o.cover)
	}
	found := orphanFound{Orphan: Orphan{Key: key, From: from, To: max(to, from), UntilEnd: untilEnd,
		FirstRefused: g.firstDone, LastRefused: g.lastInvoke, Refused: g.n, BoundMs: ms(bound)}, by: o.coverBy}
	if o.coverBy != nil {
		p := o.coverBy.process
		found.Holder = &p
	}
	o.found = append(o.found, found)
}

// orphanReason says what held an orphaned key and since when, from what the
// history shows: the last claim before it and how it ended (a client
// killed at a failpoint, a release the service said freed nothing), and,
// for a key orphaned until the end, what the nemesis inspected then.
func orphanReason(f *facts, o orphanFound) string {
	at := func(t int64) string { return relSeconds(t - f.span.Start) }
	until := "to " + at(o.To)
	if o.UntilEnd {
		until = "to the end of the run"
	}
	s := fmt.Sprintf("nobody held %s from %s %s, yet %s refused over %s", o.Key, at(o.From), until,
		count(o.Refused, "acquire was", "acquires were"), lasting(o.LastRefused-o.FirstRefused))
	if by := o.by; by != nil {
		s += "; " + claimStory(f, *by, at)
	} else {
		s += "; no client had held it before"
	}
	if o.UntilEnd {
		for _, e := range f.nemesis {
			if e.F == history.NemInspect && e.Value != nil && e.Value.Detail != "" {
				s += "; at the end of the run: " + e.Value.Detail
			}
		}
	}
	return s
}

// claimStories tell how a claim ended, from its process and the moment.
var claimStories = map[claimEnding]string{
	endedAcquireKilled:   "%s was killed at %s while its acquire was in flight",
	endedAcquireUnknown:  "%s's acquire got no answer at %s (its outcome is unknown)",
	endedByRelease:       "the last to hold it, %s, released it at %s",
	endedByEmptyRelease:  "the last to hold it, %s, released it at %s and the service answered that it held nothing to release (accepted: false)",
	endedByFailedRelease: "the last to hold it, %s, could not release it at %s",
	endedByKill:          "the last to hold it, %s, was killed at %s",
	endedByRetirement:    "the last to hold it, %s, gave up at %s (an operation with an unknown outcome)",
	endedBySession:       "the last to hold it, %s, lost its session at %s",
}

// claimStory tells how the claim before an orphaned stretch ended.
func claimStory(f *facts, by claimBy, at func(int64) string) string {
	who := by.process.String()
	s := "the last to hold it was " + who
	if story, ok := claimStories[by.end.how]; ok {
		s = fmt.Sprintf(story, who, at(by.end.event))
	}
	if fp := failpointKill(f, who, by.end.event); by.end.how == endedAcquireKilled && fp != "" {
		if words, known := failpointWords[fp]; known {
			s = fmt.Sprintf("%s was killed %s at %s, before its acquire returned: %s", who, words.where, at(by.end.event), words.leaves)
		} else {
			s = fmt.Sprintf("%s was killed at failpoint %s at %s, before its acquire returned", who, fp, at(by.end.event))
		}
	}
	switch {
	case by.end.how == endedWhilePaused:
		s = fmt.Sprintf("the last to hold it was %s; %s", who, pausedLease(who, by.ttl, at(by.end.at)))
	case by.ttl <= 0 || by.end.at == by.end.event || by.end.at == never:
	case by.outcome == attemptUnknown:
		s += fmt.Sprintf("; had it been granted its %s lease, that would have ended by %s", lasting(by.ttl*1e6), at(by.end.at))
	default:
		s += fmt.Sprintf("; its %s lease was over by %s", lasting(by.ttl*1e6), at(by.end.at))
	}
	return s
}

// pausedLease says that who's lease of ttlMs ended, at the moment end says,
// while who was paused: it believed on, the service had let go.
func pausedLease(who string, ttlMs int64, end string) string {
	return fmt.Sprintf("%s's %s lease ended at %s while %s was paused", who, lasting(ttlMs*1e6), end, who)
}

// failpointKill is the failpoint of a kill of client who recorded at t, if
// the nemesis aimed it at one.
func failpointKill(f *facts, who string, t int64) string {
	for _, e := range f.nemesis {
		if e.F == history.NemKill && e.Time == t && e.Value != nil && e.Value.Target == who {
			return e.Value.Failpoint
		}
	}
	return ""
}

// Acquires that got no answer. A run whose acquires mostly ended in an
// error or an unknown outcome, while nothing was wrong with the service,
// tested almost nothing: a grant or two among thousands of errors (a
// client whose every statement a pooler refuses) is no pass. An acquire
// made while a fault on a node, or on its own client, was in force is left
// out: a node that is down refuses connections, a partition times
// requests out, and a kill cuts an acquire short, by design; a refusal
// (busy, or a service that will not write: NOREPLICAS) is an answer.

// quietAcquires counts the acquires made with no such fault in force, those
// of them that got no answer, and their errors.
type quietAcquires struct {
	n, unanswered int
	errors        []acquireError // by first appearance, at most maxErrorKinds
	others        int            // unanswered acquires whose error is not among them
}

// acquireError is one kind of error of acquires that got no answer: the
// text of its first, how many there were, and when the first came.
type acquireError struct {
	kind  string // the text with its numbers and hex runs blanked
	text  string
	count int
	first int64
}

// maxErrorKinds bounds the kinds of errors kept, so that a history of ever
// new error texts does not grow them with its length.
const maxErrorKinds = 64

// errorNumbers are the parts of an error text that differ between two
// errors of one kind: ports, pids, hashes.
var errorNumbers = regexp.MustCompile(`[0-9a-fA-F]{6,}|[0-9]+`)

// add counts one acquire made with no fault in force; for one that got no
// answer, its error text and when it ended (never: it never did).
func (q *quietAcquires) add(answered bool, text string, at int64) {
	q.n++
	if answered {
		return
	}
	q.unanswered++
	if text == "" {
		text = "no answer"
		if at == never {
			text = "no answer by the end of the history"
		}
	}
	kind := errorNumbers.ReplaceAllString(text, "#")
	for i := range q.errors {
		if e := &q.errors[i]; e.kind == kind {
			e.count++
			return
		}
	}
	if len(q.errors) == maxErrorKinds {
		q.others++
		return
	}
	q.errors = append(q.errors, acquireError{kind: kind, text: text, count: 1, first: at})
}

// mostlyUnanswered says whether more than half of the acquires made with
// no fault in force got no answer.
func (q *quietAcquires) mostlyUnanswered() bool { return q.unanswered > 0 && 2*q.unanswered > q.n }

// common is the most common kind of error, the earliest first among equals.
func (q *quietAcquires) common() acquireError {
	var best acquireError
	for _, e := range q.errors {
		if e.count > best.count || e.count == best.count && e.first < best.first {
			best = e
		}
	}
	return best
}

// AcquireError is one kind of error of the acquires that got no answer.
type AcquireError struct {
	Error   string  `json:"error"`
	Count   int     `json:"count"`
	FirstMs float64 `json:"first_ms"` // from the start of the history; -1 for one that never came back
}

// maxAcquireErrors is how many kinds results.json lists.
const maxAcquireErrors = 5

// errorsOf lists the commonest kinds of q's errors, t0 the history's start.
func errorsOf(q *quietAcquires, t0 int64) []AcquireError {
	kinds := slices.Clone(q.errors)
	slices.SortStableFunc(kinds, func(a, b acquireError) int {
		return cmp.Or(cmp.Compare(b.count, a.count), cmp.Compare(a.first, b.first))
	})
	var out []AcquireError
	for _, e := range kinds[:min(len(kinds), maxAcquireErrors)] {
		first := -1.0
		if e.first != never {
			first = ms(e.first - t0)
		}
		out = append(out, AcquireError{Error: e.text, Count: e.count, FirstMs: first})
	}
	return out
}

// faultsInForce follows, event by event, the faults the nemesis has
// started and not healed, and when each target's last one ended, as the
// verb table says (history.VerbOf): enough to tell whether a fault on a
// node or on a client was in force during an acquire that just ended.
type faultsInForce struct {
	open    map[string]string // verb + target of a fault in force -> its target
	nodes   int               // faults in force on nodes
	clients map[string]int    // faults in force on each client
	// nodesEnded and clientEnded are when the last fault on a node, and
	// on each client, ended (a point fault ends where it starts).
	nodesEnded  int64
	clientEnded map[string]int64
}

func newFaultsInForce() faultsInForce {
	return faultsInForce{open: map[string]string{}, clients: map[string]int{}, nodesEnded: math.MinInt64, clientEnded: map[string]int64{}}
}

// onClient says whether target names a client process (c3).
func onClient(target string) bool {
	p, ok := clientTarget(&history.Value{Target: target})
	return ok && p.String() == target
}

func (f *faultsInForce) observe(e *history.Event) {
	target := ""
	if e.Value != nil {
		target = e.Value.Target
	}
	end := func(verb string) {
		key := verb + " " + target
		if _, ok := f.open[key]; !ok {
			return
		}
		delete(f.open, key)
		f.ended(target, e.Time)
		if onClient(target) {
			f.clients[target]--
		} else {
			f.nodes--
		}
	}
	switch v := history.VerbOf(e.F); v.Role {
	case history.Observes:
	case history.Heals:
		end(v.Heals)
	case history.Starts:
		for _, ended := range v.Ends {
			end(ended)
		}
		key := e.F + " " + target
		if _, ok := f.open[key]; ok {
			return
		}
		f.open[key] = target
		if onClient(target) {
			f.clients[target]++
		} else {
			f.nodes++
		}
		// A kill no one heals (a client's) is a moment: it is in force
		// during the acquire it cut short, as a point.
		if !v.UntilEnd {
			f.ended(target, e.Time)
		}
	default:
		f.ended(target, e.Time)
	}
}

func (f *faultsInForce) ended(target string, t int64) {
	if onClient(target) {
		f.clientEnded[target] = max(f.clientEnded[target], t)
	} else {
		f.nodesEnded = max(f.nodesEnded, t)
	}
}

// during says whether a fault on a node or on process p was in force at
// some moment since invoke, up to now.
func (f *faultsInForce) during(p history.Process, invoke int64) bool {
	client := p.String()
	if f.nodes > 0 || f.clients[client] > 0 || f.nodesEnded >= invoke {
		return true
	}
	t, ok := f.clientEnded[client]
	return ok && t >= invoke
}

// conclude judges liveness over the whole history; the settled stretches
// alone say nothing of it.
func (l *Liveness) conclude(c *conclusion) {
	if !c.settled {
		*l = checkLiveness(c.f, c.s.latencies)
	}
}

// AnomalyCount counts the orphaned stretches.
func (l *Liveness) AnomalyCount() int { return l.Orphaned }

// AnomalyTimes are the first refusals of the orphaned stretches kept,
// while nobody held the key.
func (l *Liveness) AnomalyTimes(note func(int64)) {
	for _, o := range l.Orphans {
		note(o.FirstRefused)
	}
}

// EvidenceLines are the grant rate, the longest stall, the acquire latency, the
// refusals and orphaned stretches, then each orphan kept and the stall.
func (l *Liveness) EvidenceLines(_ Status, t0 int64) (string, []string) {
	numbers := fmt.Sprintf("%s (%.1f/s), longest stall %s ms, acquire p50 %s ms, p99 %s ms",
		Plural(l.Grants, "grant"), l.GrantsPerSec, FmtMs(l.LongestStallMs), FmtMs(l.AcquireP50Ms), FmtMs(l.AcquireP99Ms))
	if l.AcquireRefused > 0 {
		// A mitigation at work (min-replicas-to-write) shows as refusals.
		numbers += fmt.Sprintf(", %s refused by the service", Plural(l.AcquireRefused, "acquire"))
	}
	if l.AcquireNotSent > 0 {
		numbers += fmt.Sprintf(", %s not sent by the client (not connected)", Plural(l.AcquireNotSent, "acquire"))
	}
	if l.Orphaned > 0 {
		numbers += fmt.Sprintf(", orphaned %s", Plural(l.Orphaned, "time"))
		if l.StuckUntilEnd {
			numbers += " (until the end of the run)"
		}
	}
	details := evidenceLines(len(l.Orphans), func(i int) string {
		o := l.Orphans[i]
		until := "to " + RelSec(o.To, t0)
		if o.UntilEnd {
			until = "to the end of the run"
		}
		return fmt.Sprintf("key %q orphaned from %s %s: %s refused while nobody held it, over longer than the %s ms bound; %s",
			o.Key, RelSec(o.From, t0), until, Plural(o.Refused, "acquire"), FmtMs(o.BoundMs), o.Reason)
	})
	if l.Stall != nil {
		details = append(details, fmt.Sprintf("longest stall from %s to %s", RelSec(l.Stall.Start, t0), RelSec(l.Stall.End, t0)))
	}
	if l.StallReason != "" {
		details = append(details, l.StallReason)
	}
	return numbers, details
}
