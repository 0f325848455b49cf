package checker

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/lockcheck/lockcheck/history"
)

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
