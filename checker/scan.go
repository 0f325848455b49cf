package checker

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockcheck/lockcheck/history"
)

// scanner reads a history once, event by event, into the facts every
// check reads: one pass, so that each check sees the same claims.
type scanner struct {
	header    history.Header
	cfg       history.RunConfig
	allowance func(ttlMs int64) int64
	facts     facts
	keys      map[string]*keyFacts
	lastKey   *keyFacts // the key of the latest lookup: most runs have one
	procs     map[history.Process]*procState
	events    int
	kept      keptValues
	sessions  sessionEnds
	inForce   faultsInForce // the faults so far, for quiet acquires
	story     sessionStory

	// settleAt is the package's settleAt, or 0 for a scan that settles
	// nothing before the end.
	settleAt   int
	slack      int64 // settleSlack
	following  bool  // the history is being written: its end is not known
	settledAny bool
	lastCut    int64 // the latest settling of any key
	// reordered is set when the history went back past a settled
	// stretch: the check is then made again without settling.
	reordered bool

	// heads is what a soak's segment carries over from the ones before
	// it, by key (history.SegmentHead); empty for any other history.
	heads map[string]*history.KeyHead

	hasLog    bool           // the run has a resource log
	source    resourceSource // its entries not taken yet; nil once all are
	logKeys   logKeys        // whether its entries name the history's keys
	pulled    *history.ResourceEntry
	err       error // of the resource log
	outcomes  *outcomes
	resource  *resourceCheck
	unjudged  int
	weak      map[string]bool // requests of settled writes that had no accepted entry
	latencies []int64         // of every grant
	lin       *linearizabilityCheck

	// logCut is set when the resource log's last line was cut off;
	// logAccepted counts its accepted entries and confirmed the writes the
	// history shows accepted, each of which a whole log holds
	// (withCompleteLog).
	logCut      bool
	logAccepted int
	confirmed   int
}

// keptValues holds copies of the optional numbers the scan keeps of an
// event's value, in chunks: pointing into the decoded value would keep the
// whole of it alive for as long as the fact.
type keptValues struct {
	ints  []int64
	bools []bool
}

const keptChunk = 1024

// int copies *p, or is nil for nil.
func (k *keptValues) int(p *int64) *int64 { return keep(&k.ints, p) }

// bool copies *p, or is nil for nil.
func (k *keptValues) bool(p *bool) *bool { return keep(&k.bools, p) }

// keep copies *p into the current chunk of *chunk, starting a new chunk
// when it is full (the old one stays alive through the pointers into it).
func keep[T any](chunk *[]T, p *T) *T {
	if p == nil {
		return nil
	}
	if len(*chunk) == cap(*chunk) {
		*chunk = make([]T, 0, keptChunk)
	}
	*chunk = append(*chunk, *p)
	return &(*chunk)[len(*chunk)-1]
}

// noExpiry is the expiry of a lease without a TTL while the history is
// still being read: it outlives the history, whose end is not known yet.
// finish replaces it by the end of the span + 1. It lies above every event
// time and below never, so every comparison made with it during the scan
// comes out as it would with the end of the span + 1.
const noExpiry = never - 1

// scan reads the history once and collects grants, acquire attempts, writes,
// reads and faults per key, settling nothing.
func scan(h *history.History, allowance func(ttlMs int64) int64) *facts {
	s := newScanner(h.Header, Options{ClockAllowance: allowance}.withDefaults(), nil)
	s.settleAt = 0
	for i := range h.Events {
		s.event(&h.Events[i])
	}
	return s.finish()
}

// newScanner starts the scan of a history with header hd, opts with their
// defaults, and its resource log (nil: none).
func newScanner(hd history.Header, opts Options, resource resourceSource) *scanner {
	s := &scanner{
		header:    hd,
		cfg:       hd.Config,
		allowance: driftAllowance(opts.ClockAllowance, hd.WallOffset),
		keys:      map[string]*keyFacts{},
		procs:     map[history.Process]*procState{},
		sessions:  newSessionEnds(),
		inForce:   newFaultsInForce(),
		settleAt:  settleAt,
		slack:     settleSlack,
		hasLog:    resource != nil,
		source:    resource,
		outcomes:  &outcomes{},
		weak:      map[string]bool{},
		lin:       newLinearizabilityCheck(opts.LinearizabilityTimeout),
	}
	source := SourceHistory
	if s.hasLog {
		source = SourceResourceLog
		s.outcomes.byReq = map[string]*history.ResourceEntry{}
	}
	s.resource = newResourceCheck(source)
	s.heads = map[string]*history.KeyHead{}
	if hd.Head != nil {
		for i := range hd.Head.Keys {
			h := &hd.Head.Keys[i]
			s.heads[h.Key] = h
			if h.WrittenFence != nil {
				s.resource.highest[h.Key] = *h.WrittenFence
			}
		}
	}
	// A history with no events is the point of its header's start.
	s.facts.span = Interval{Start: hd.StartTime, End: hd.StartTime}
	return s
}

// event takes the next event of the history; it keeps no pointer to e.
func (s *scanner) event(e *history.Event) {
	if s.events == 0 {
		s.facts.span = Interval{Start: e.Time, End: e.Time}
	}
	key := e.Key
	if ps, ok := s.procs[e.Process]; ok && e.Type != history.Invoke && ps.hasInvoke {
		key = ps.invoke.Key
	}
	if e.Process == history.Nemesis {
		key = ""
	}
	s.observe(e, key)
	s.events++
	s.facts.span.Start = min(s.facts.span.Start, e.Time)
	s.facts.span.End = max(s.facts.span.End, e.Time)
	switch {
	case e.Process == history.Nemesis:
		c := *e
		s.nemesis(&c)
		return
	case e.Type == history.Invoke:
		s.invoke(e)
	default:
		s.complete(e)
	}
	if k := s.known(key); k != nil {
		k.last = max(k.last, e.Time)
		s.trySettle(k)
	}
}

// known is the facts of key, or nil when no event named it.
func (s *scanner) known(key string) *keyFacts {
	if k := s.lastKey; k != nil && k.key == key {
		return k
	}
	return s.keys[key]
}

// finish ends the scan at the end of the history and returns its facts.
func (s *scanner) finish() *facts {
	s.finishProcs()
	end := s.facts.span.End + 1
	for _, k := range s.keys {
		for i := range k.grants {
			if g := &k.grants[i]; g.CertainEnd == noExpiry {
				g.CertainEnd = end
			}
		}
	}
	s.facts.faults = collectFaults(s.facts.nemesis, s.facts.span.End)
	s.facts.keys = slices.SortedFunc(maps.Values(s.keys), func(a, b *keyFacts) int { return strings.Compare(a.key, b.key) })
	return &s.facts
}

func (s *scanner) key(name string) *keyFacts {
	k := s.known(name)
	if k == nil {
		k = &keyFacts{key: name}
		if h := s.heads[name]; h != nil && h.Fence != nil {
			k.settled.fences.startAfter(name, *h.Fence, s.header.StartTime)
		}
		s.keys[name] = k
	}
	s.lastKey = k
	return k
}

func (s *scanner) proc(p history.Process) *procState {
	ps, ok := s.procs[p]
	if !ok {
		ps = &procState{}
		s.procs[p] = ps
	}
	return ps
}

func (s *scanner) nemesis(e *history.Event) {
	s.facts.nemesis = append(s.facts.nemesis, e)
	s.sessions.observe(e, s.procs)
	s.inForce.observe(e)
	switch e.F {
	case history.NemInspect:
		s.story.inspected(e)
	case history.NemRunEnd:
		s.facts.lastRunEnd = e
		if !s.facts.hasRunEnd {
			s.facts.runEnd, s.facts.hasRunEnd = e.Time, true
		}
	case history.NemKill:
		p, ok := clientTarget(e.Value)
		if !ok {
			return
		}
		ps, ok := s.procs[p]
		if !ok {
			return
		}
		// A killed client believes nothing any more and tries nothing;
		// its pending release may or may not have reached the service.
		s.endRelease(ps, endedByKill, e.Time)
		endSessions(ps, e.Time)
		s.retire(ps, e.Time, endedByKill)
		if ps.attemptKey != nil {
			ps.attemptKey.attempts[ps.attemptIdx].endUnknown(e.Time, endedAcquireKilled)
			ps.attemptKey = nil
			s.facts.acquireUnknown++
		}
	}
}

// clientTarget reads a nemesis target naming a client process, such as "c3".
func clientTarget(v *history.Value) (history.Process, bool) {
	if v == nil || !strings.HasPrefix(v.Target, "c") {
		return 0, false
	}
	n, err := strconv.Atoi(v.Target[1:])
	if err != nil || n < 0 {
		return 0, false
	}
	return history.Process(n), true
}

func (s *scanner) invoke(e *history.Event) {
	ps := s.proc(e.Process)
	ps.invoke, ps.hasInvoke = *e, true
	switch e.F {
	case history.FAcquire:
		s.flushRead(ps)
		// A holder that asks for the lock again (a re-entrant acquire)
		// keeps its lease: only a grant, a release or retiring ends it.
		k := s.key(e.Key)
		k.attempts = append(k.attempts, attempt{invoke: e.Time, end: never, process: e.Process, ttl: ttlOf(nil, e.Value, s.cfg.TTLms)})
		k.settled.attempted = true
		s.facts.acquireAttempts++
		ps.attemptKey, ps.attemptIdx = k, len(k.attempts)-1
	case history.FRelease:
		s.flushRead(ps)
		// The client stops relying on the lock when it lets it go; whether
		// the lease ends waits for the release's outcome.
		if i := ps.holding(e.Key); i >= 0 {
			l := ps.held[i]
			if l.believed {
				l.grant().BeliefEnd = e.Time
				l.believed = false
			}
			ps.releasing, ps.releaseAt, ps.hasReleasing = l, e.Time, true
			ps.held = slices.Delete(ps.held, i, i+1)
		}
	case history.FRead:
		s.flushRead(ps)
	case history.FWrite:
		s.facts.anyWrite = true
		s.facts.writes++
		k := s.key(e.Key)
		w := writeOp{process: e.Process, index: e.Index, invoke: e.Time}
		if v := e.Value; v != nil {
			w.value, w.read, w.fence, w.req = s.kept.int(v.Value), s.kept.int(v.Read), s.kept.int(v.Fence), v.Req
		}
		if ps.hasRead && ps.readKey == k {
			w.from, w.hasFrom = ps.read, true
			ps.hasRead = false
		} else {
			s.flushRead(ps)
		}
		k.writes = append(k.writes, w)
		ps.writeKey, ps.writeIdx = k, len(k.writes)-1
	}
}

func (s *scanner) complete(e *history.Event) {
	ps := s.proc(e.Process)
	if !ps.hasInvoke {
		return // history.Read rejects this; a hand-built history may not
	}
	inv := &ps.invoke
	ps.hasInvoke = false
	switch inv.F {
	case history.FAcquire:
		s.completeAcquire(ps, inv, e)
	case history.FRelease:
		s.completeRelease(ps, e)
	case history.FExtend:
		// An extend that found the lease no longer the client's (accepted
		// false) pushes nothing out.
		if i := ps.holding(inv.Key); i >= 0 && e.Type == history.OK && confirmed(e.Value) {
			l := &ps.held[i]
			ttl := ttlOf(e.Value, inv.Value, l.grant().TTLms)
			l.expiry = max(l.expiry, s.expiry(inv.Time, ttl))
			l.claimTTL(ttl)
		} else if i >= 0 && e.Type == history.Info {
			// It may have pushed the lease out before the holder gave up.
			ps.held[i].claimTTL(ttlOf(nil, inv.Value, ps.held[i].grant().TTLms))
		}
	case history.FRead:
		if e.Type == history.OK && e.Value != nil && e.Value.Value != nil {
			ps.read = readOp{process: e.Process, call: inv.Time, ret: e.Time, value: *e.Value.Value}
			ps.readKey, ps.hasRead = s.key(inv.Key), true
		}
	case history.FWrite:
		if ps.writeKey != nil {
			w := &ps.writeKey.writes[ps.writeIdx]
			w.status, w.done, w.doneIndex = e.Type, e.Time, e.Index
			if e.Type == history.OK && e.Value != nil {
				w.accepted, w.prev = s.kept.bool(e.Value.Accepted), s.kept.int(e.Value.Prev)
			}
			if e.Type == history.OK && confirmed(e.Value) {
				s.facts.accepted++
				s.confirmed++
			}
			ps.writeKey = nil
		}
	}
	if e.Type == history.Info {
		// The process retires: it no longer believes it holds the lock.
		endSessions(ps, inv.Time)
		s.retire(ps, e.Time, endedByRetirement)
	}
}

// confirmed reads an ok completion's "accepted": absent means yes, as a
// hand-written history that does not say is read.
func confirmed(v *history.Value) bool { return v == nil || v.Accepted == nil || *v.Accepted }

// completeRelease decides whether a release ended its lease: an ok release
// that deleted the key ends it at the release's invoke; one that failed or
// reported it deleted nothing (accepted false) leaves it held until it
// expires or a later release ends it; an unknown outcome (info) may have
// ended it at the invoke. A lock won on several nodes reports accepted
// false when no majority deleted the key, which some nodes may have done:
// such a release may have ended the lease too.
func (s *scanner) completeRelease(ps *procState, e *history.Event) {
	if !ps.hasReleasing {
		return
	}
	s.story.released(ps.releasing.grant(), ps.releaseAt, e)
	deletedNothing := e.Type == history.OK && !confirmed(e.Value) && len(ps.releasing.grant().Nodes) == 0
	switch {
	case e.Type == history.OK && confirmed(e.Value):
		ps.releasing.claimEnds(endedByRelease, e.Time, ps.releaseAt)
	case e.Type == history.OK:
		// The service answered that it held nothing for the client: a
		// lease without a TTL is the service's to free from now on.
		ps.releasing.claimEnds(endedByEmptyRelease, e.Time, ps.releaseAt)
	case e.Type == history.Fail && ps.releasing.hasTTL():
		ps.releasing.claimEnds(endedByFailedRelease, e.Time, ps.releaseAt)
	}
	if e.Type == history.Fail || deletedNothing {
		ps.held = append(ps.held, ps.releasing)
		ps.hasReleasing = false
		return
	}
	s.endRelease(ps, endedByFailedRelease, e.Time)
}

// endRelease ends the lease of the pending release at the release's invoke,
// the earliest moment it may have ended; its claim ends as how says, at
// (never: the history ended first), unless the release's outcome ended it.
func (s *scanner) endRelease(ps *procState, how claimEnding, at int64) {
	if ps.hasReleasing {
		ps.releasing.claimEnds(how, at, ps.releaseAt)
		ps.releasing.end(ps.releaseAt, 0)
		ps.hasReleasing = false
	}
}

func (s *scanner) completeAcquire(ps *procState, inv, e *history.Event) {
	k := ps.attemptKey
	ps.attemptKey = nil
	notSent := e.Type == history.Fail && e.Value != nil && e.Value.NotSent
	var a *attempt
	attemptIdx := -1
	if k != nil {
		a, attemptIdx = &k.attempts[ps.attemptIdx], ps.attemptIdx
		a.end = e.Time
		if !s.inForce.during(e.Process, a.invoke) {
			// An acquire the client sent nothing of got no answer from
			// the service.
			s.facts.quiet.add(e.Type != history.Info && !notSent, e.Error, e.Time)
		}
	}
	switch e.Type {
	case history.Fail:
		// The prefix is how histories before the typed field said it.
		refused := !notSent && ((e.Value != nil && e.Value.Refused) || strings.HasPrefix(e.Error, history.RefusedPrefix))
		switch {
		case notSent:
			s.facts.acquireNotSent++
		case refused:
			s.facts.acquireRefused++
		default:
			s.facts.acquireFailed++
		}
		if a != nil {
			a.outcome = attemptBusy
			if refused || notSent {
				a.outcome = attemptRefused
			}
		}
		return
	case history.Info:
		s.facts.acquireUnknown++
		if a != nil {
			a.endUnknown(e.Time, endedAcquireUnknown)
		}
		return
	}
	if k == nil {
		k = s.key(inv.Key)
	}
	// A grant to a holder of the key continues its lease: the client's
	// belief moves to the new grant, and the earlier grant's lease lasts as
	// long as the new one's (see continued).
	var before []continued
	if i := ps.holding(k.key); i >= 0 {
		old := ps.held[i]
		if old.believed {
			old.grant().BeliefEnd = e.Time
		}
		old.claimEnds(endedByRegrant, e.Time, e.Time)
		c := continued{idx: old.idx, cap: never, next: inv.Time}
		if old.expiry < e.Time {
			c.cap = old.expiry
		}
		before = append([]continued{c}, old.before...)
		ps.held = slices.Delete(ps.held, i, i+1)
	}
	g := Grant{Key: k.key, Process: e.Process, Invoke: inv.Time, OK: e.Time, Index: e.Index}
	g.TTLms = ttlOf(e.Value, inv.Value, s.cfg.TTLms)
	if e.Value != nil {
		g.Fence, g.Nodes, g.Session, g.Via = s.kept.int(e.Value.Fence), e.Value.Nodes, e.Value.Session, e.Value.Via
	}
	if g.Session != "" && e.Value.TTLms == 0 {
		// A session lock has no TTL: the run's --ttl is not its lease.
		// One whose grant names a TTL is also ended by its session's
		// idle timeout (MariaDB's wait_timeout), which that TTL is.
		g.TTLms = 0
	}
	if a != nil {
		a.outcome, a.ttl = attemptGranted, g.TTLms
	}
	k.grants = append(k.grants, g)
	s.story.granted(g)
	expiry := s.expiry(inv.Time, g.TTLms)
	if g.Session != "" {
		// Kills of its session or node already read; later ones cut it
		// as they come (sessionEnds.observe).
		expiry = s.sessions.end(g.Session, g.Via, inv.Time, expiry)
	}
	ps.held = append(ps.held, heldLease{key: k, idx: len(k.grants) - 1, expiry: expiry, believed: true, before: before, attempt: attemptIdx})
}

// endUnknown ends an acquire of unknown outcome at end (its info, or the
// kill of its process): it may have been granted, and the service may then
// keep the key for its TTL after that moment at the latest.
func (a *attempt) endUnknown(end int64, how claimEnding) {
	a.end, a.outcome = end, attemptUnknown
	_, latest := history.LeaseEnds(end, end, time.Duration(a.ttl)*time.Millisecond, 0)
	a.claim, a.claimed = claimEnd{at: latest, how: how, event: end}, true
}

// hasTTL says whether the lease has a TTL that frees it by itself.
func (l heldLease) hasTTL() bool { return l.attempt >= 0 && l.key.attempts[l.attempt].ttl > 0 }

// claimTTL raises the TTL of the claim of the acquire that won l: an extend
// may have pushed the lease out by ttl (ms).
func (l heldLease) claimTTL(ttl int64) {
	if l.attempt >= 0 {
		a := &l.key.attempts[l.attempt]
		a.ttl = max(a.ttl, ttl)
	}
}

// holding is the index in ps.held of the lease on key, or -1.
func (ps *procState) holding(key string) int {
	for i := range ps.held {
		if ps.held[i].key.key == key {
			return i
		}
	}
	return -1
}

// ttlOf is the lease length a completion promises, else what its invoke
// asked for, else the fallback.
func ttlOf(done, inv *history.Value, fallback int64) int64 {
	switch {
	case done != nil && done.TTLms > 0:
		return done.TTLms
	case inv != nil && inv.TTLms > 0:
		return inv.TTLms
	}
	return fallback
}

// expiry is the earliest moment a lease taken at invoke for ttlMs can have
// expired. A lease without a TTL outlives the history.
func (s *scanner) expiry(invoke, ttlMs int64) int64 {
	if ttlMs <= 0 {
		return noExpiry
	}
	earliest, _ := history.LeaseEnds(invoke, invoke, time.Duration(ttlMs)*time.Millisecond, time.Duration(s.allowance(ttlMs)))
	return earliest
}

// retire ends what a process that acts no more (killed, or retired by an
// info outcome, or still there when the history ends) held: its belief at
// at, its leases when they expire, their claims as how says.
func (s *scanner) retire(ps *procState, at int64, how claimEnding) {
	for _, l := range ps.held {
		beliefEnd := l.grant().BeliefEnd
		if l.believed {
			beliefEnd = at
		}
		if how == endedAtHistoryEnd {
			l.claimEnds(how, never, beliefEnd)
		} else {
			l.claimEnds(how, at, beliefEnd)
		}
		l.end(never, at)
	}
	ps.held = ps.held[:0]
	s.flushRead(ps)
}

// flushRead records a read that no write followed as a read-only operation.
func (s *scanner) flushRead(ps *procState) {
	if ps.hasRead {
		ps.readKey.reads = append(ps.readKey.reads, ps.read)
		ps.hasRead = false
	}
}

func (s *scanner) finishProcs() {
	for _, ps := range s.procs {
		// A release still pending may have reached the service.
		s.endRelease(ps, endedAtHistoryEnd, never)
		s.retire(ps, s.facts.span.End, endedAtHistoryEnd)
		if ps.attemptKey != nil {
			s.facts.acquireUnknown++
			a := &ps.attemptKey.attempts[ps.attemptIdx]
			if !s.inForce.during(ps.invoke.Process, a.invoke) {
				s.facts.quiet.add(false, "", never)
			}
			a.outcome, a.claim, a.claimed = attemptUnknown, claimEnd{at: never, how: endedAcquirePending, event: never}, true
		}
	}
}
