package checker

import (
	"errors"
	"math"

	"github.com/lockcheck/lockcheck/history"
)

// The scan keeps a key's grants, acquire attempts, writes and reads only
// until it can settle them: once it holds settleAt of them and the key is
// at rest (nobody holds or believes it, no read, write or release on it is
// in flight, every lease on it has ended), the checks run on that stretch
// and the scan keeps only what later stretches are checked against (the
// fences handed out, the highest fence before a pending acquire, the gap
// since the last grant, the open linearizability segment). Memory then
// follows the number of clients and keys, not the length of the history.
//
// A stretch settled at time T is sound when every later event on the key
// is timed after T. A recorded history is, up to the moments between
// taking a time and appending the event (a fraction of a millisecond, more
// on a loaded machine): so the scan picks a point of rest at T, goes on
// reading, and settles the stretch up to that point only once it has read
// settleSlack past T without an event of the key timed at T or before (one
// that was drops the point). A history that still goes back past a
// settled stretch (or a resource log entry for a write already settled
// without it) is checked again from the start without settling.
var (
	settleAt    = 4096
	settleSlack = int64(250e6)
)

// restPoint is a point at which a key was at rest: the facts the scan held
// of it then, and the earliest acquire then in flight (never: none).
type restPoint struct {
	at                              int64
	grants, attempts, writes, reads int
	pendingFrom                     int64
}

// keySettled is what the checks keep of a key's settled stretches.
type keySettled struct {
	attempted bool // some acquire named the key
	writes    int  // every write on the key
	// cut is the time of the latest settling: later events on the key
	// must be timed after it.
	cut    int64
	hasCut bool
	// rest is the point of rest the scan settles at once it has read
	// settleSlack past it; nil when there is none.
	rest *restPoint

	leaseViolations int
	leaseEvidence   []LeaseViolation // the first maxEvidence
	ownership       DoubleOwnership  // counts, and the first maxEvidence windows
	fences          fenceOrder
	stalls          stalls
	orphans         orphanSweep
	lin             segmenter
}

// resourceSource yields the resource log's entries in Seq order, nil at its
// end; a nil source is a run with no resource log.
type resourceSource func() (*history.ResourceEntry, error)

// errLogCut is how a source ends a resource log whose last line was cut
// off: not an error of the reading, a log that may lack entries.
var errLogCut = errors.New("the resource log's last line is cut off")

// sliceSource yields entries (sorted by Seq first, as the check judges
// them), or is nil for nil entries.
func sliceSource(entries []history.ResourceEntry) resourceSource {
	return logSource(entries, false)
}

// logSource is sliceSource of a log whose last line was cut off (cut),
// which it ends with errLogCut.
func logSource(entries []history.ResourceEntry, cut bool) resourceSource {
	if entries == nil {
		return nil
	}
	entries = sortedBySeq(entries)
	i := 0
	return func() (*history.ResourceEntry, error) {
		if i == len(entries) {
			if cut {
				return nil, errLogCut
			}
			return nil, nil
		}
		i++
		return &entries[i-1], nil
	}
}

// size is how many facts the scan holds of k.
func (k *keyFacts) size() int { return len(k.grants) + len(k.attempts) + len(k.writes) + len(k.reads) }

// observe notes an event's time against the settled stretches and the
// points of rest before the scan takes it: key is the key of the
// operation it belongs to ("" for the nemesis).
func (s *scanner) observe(e *history.Event, key string) {
	k := s.known(key)
	ok := k != nil
	if ok && k.settled.rest != nil && e.Time <= k.settled.rest.at {
		k.settled.rest = nil // the key was not at rest at that time after all
	}
	if key == "" {
		for _, k := range s.keys {
			if k.settled.rest != nil && e.Time <= k.settled.rest.at {
				k.settled.rest = nil
			}
		}
	}
	if !s.settledAny {
		return
	}
	if e.Time < s.facts.span.Start || (key == "" && e.Time <= s.lastCut) || (ok && k.settled.hasCut && e.Time <= k.settled.cut) {
		s.reordered = true
	}
}

// trySettle settles k up to its point of rest once the scan read far enough
// past it, and picks a point of rest when the scan holds enough of k and k
// is at rest.
func (s *scanner) trySettle(k *keyFacts) {
	if s.settleAt == 0 || s.reordered {
		return
	}
	if r := k.settled.rest; r != nil {
		if s.facts.span.End > r.at+s.slack && !s.sessionsPending() {
			s.settleRest(k)
		}
		return
	}
	if k.size() < s.settleAt || s.sessionsPending() {
		return
	}
	for _, ps := range s.procs {
		busy := ps.hasInvoke && ps.invoke.Key == k.key && ps.invoke.F != history.FAcquire
		if busy || (ps.hasReleasing && ps.releasing.key == k) || (ps.hasRead && ps.readKey == k) || ps.holding(k.key) >= 0 {
			return
		}
	}
	r := &restPoint{at: k.last, grants: len(k.grants), attempts: len(k.attempts), writes: len(k.writes), reads: len(k.reads), pendingFrom: never}
	for i := range k.grants {
		g := &k.grants[i]
		if g.CertainEnd > k.last { // a lease still live, or without a TTL
			return
		}
		r.at = max(r.at, g.BeliefEnd)
	}
	for _, a := range k.attempts {
		if a.end != never {
			r.at = max(r.at, a.end)
		} else {
			r.pendingFrom = min(r.pendingFrom, a.invoke)
		}
	}
	k.settled.rest = r
}

// sessionsPending says a kill-session whose landing is not known yet may
// still be undone: held leases may still change.
func (s *scanner) sessionsPending() bool {
	for _, undo := range s.sessions.undo {
		if len(undo) > 0 {
			return true
		}
	}
	return false
}

// settleRest settles k up to its point of rest: what the scan read of k
// since is kept, and the indices into it moved.
func (s *scanner) settleRest(k *keyFacts) {
	r := k.settled.rest
	k.settled.rest = nil
	grants, writes, reads := k.grants, k.writes, k.reads
	k.grants, k.writes, k.reads = grants[:r.grants], writes[:r.writes], reads[:r.reads]
	s.pullResource(r.at)
	// The acquires read since the point of rest belong to the next
	// stretch: the orphan sweep reads only those done by it.
	from := s.settle(k, r.pendingFrom, min(r.pendingFrom, r.at+1), false)
	s.forgetWrites(k)
	k.grants = append([]Grant(nil), grants[r.grants:]...)
	k.writes = append([]writeOp(nil), writes[r.writes:]...)
	k.reads = append([]readOp(nil), reads[r.reads:]...)
	for _, ps := range s.procs {
		for i := range ps.held {
			if l := &ps.held[i]; l.key == k {
				l.idx -= r.grants
				for j := range l.before {
					l.before[j].idx -= r.grants
				}
			}
		}
		if ps.hasReleasing && ps.releasing.key == k {
			ps.releasing.idx -= r.grants
			for j := range ps.releasing.before {
				ps.releasing.before[j].idx -= r.grants
			}
		}
		if ps.writeKey == k {
			ps.writeIdx -= r.writes
		}
	}
	s.forgetAttempts(k, from)
	k.settled.cut, k.settled.hasCut = r.at, true
	s.lastCut, s.settledAny = max(s.lastCut, r.at), true
}

// pullResource takes the resource log's entries up to time at.
func (s *scanner) pullResource(at int64) {
	for s.source != nil {
		if s.pulled == nil {
			e, err := s.source()
			switch {
			case err == errLogCut:
				s.logCut = true
			case err != nil:
				s.err = err
			}
			if e == nil {
				if !s.following {
					s.source = nil // the end of the log
				}
				return
			}
			c := *e
			s.pulled = &c
		}
		if s.pulled.Time > at {
			return
		}
		if len(s.weak) > 0 && s.weak[s.pulled.Req] {
			s.reordered = true // a write settled without this entry
		}
		s.logKeys.note(s.pulled.Key, s.known(s.pulled.Key) != nil)
		if s.pulled.Accepted {
			s.facts.accepted++
			s.logAccepted++
		}
		s.outcomes.add(s.pulled)
		s.resource.add(s.pulled)
		s.pulled = nil
	}
}

// settle runs the checks on the stretch of k the scan holds, settled at
// time at with acquires in flight from pendingFrom; the acquires it holds
// from horizon on (pendingFrom, or the point of rest) are the next
// stretch's. With final, the end of the history, it is the key's last. It
// returns the moment from which the key's acquires still matter
// (stalls.settle, orphanSweep.sweep).
func (s *scanner) settle(k *keyFacts, pendingFrom, horizon int64, final bool) int64 {
	ks := &k.settled
	ks.writes += len(k.writes)
	leaseViolations(k.grants, func(earlier, later Grant) {
		ks.leaseViolations++
		if len(ks.leaseEvidence) < maxEvidence {
			ks.leaseEvidence = append(ks.leaseEvidence, LeaseViolation{Key: k.key, Earlier: earlier, Later: later})
		}
	})
	cover := s.faultCover(final)
	ownershipWindows(k, s.outcomes, func(w Window) {
		o := &ks.ownership
		o.Windows++
		o.TotalMs += w.Ms
		o.MaxMs = max(o.MaxMs, w.Ms)
		o.UnsafeWrites += w.Unsafe
		if len(o.List) < maxEvidence {
			o.List = append(o.List, w)
			o.letGo = append(o.letGo, lettingGo(k.grants, w, cover)...)
		}
	})
	var fenced []Grant
	for _, g := range k.grants {
		if g.Fence != nil {
			fenced = append(fenced, g)
		}
		s.latencies = append(s.latencies, g.OK-g.Invoke)
	}
	ks.fences.settle(fenced, pendingFrom)
	if !s.hasLog {
		entries, unjudged := entriesFromHistory(k)
		s.unjudged += unjudged
		for i := range entries {
			s.resource.add(&entries[i])
		}
	}
	end := s.facts.span.End
	if s.facts.hasRunEnd {
		end = s.facts.runEnd
	}
	from := ks.stalls.settle(k.grants, k.attempts, s.facts.span.Start, end, final)
	ks.orphans.sweep(k.key, k.attempts, horizon, cover, s.facts.span.Start, end, final)
	if ks.lin.key == "" {
		ks.lin = newSegmenter(k.key)
	}
	for _, op := range keyOperations(k, s.outcomes) {
		ks.lin.add(op, s.lin.add)
	}
	if final {
		ks.lin.close(s.lin.add)
	}
	// The orphan sweep has yet to read the acquires answered from
	// horizon on.
	return min(from, horizon-1)
}

// faultCover is the faults that may prolong a claim (orphans.go): of the
// whole history at its end, else of the nemesis events read so far, a
// fault not healed yet lasting until it is.
func (s *scanner) faultCover(final bool) faultCover {
	if final {
		return newFaultCover(s.facts.faults, never)
	}
	return newFaultCover(collectFaults(s.facts.nemesis, never), s.facts.span.End)
}

// forgetWrites drops the resource log entries of k's writes being
// settled, remembering the writes that had no accepted one.
func (s *scanner) forgetWrites(k *keyFacts) {
	for i := range k.writes {
		req := k.writes[i].req
		if !s.hasLog || req == "" {
			continue
		}
		// A later entry of a write settled with no accepted one would have
		// changed its outcome.
		if e, ok := s.outcomes.byReq[req]; !ok || !e.Accepted {
			s.weak[req] = true
		}
		delete(s.outcomes.byReq, req)
	}
}

// forgetAttempts keeps the acquires of k that may still be in flight in a
// gap from from on.
func (s *scanner) forgetAttempts(k *keyFacts, from int64) {
	moved := map[int]int{}
	kept := k.attempts[:0]
	for i, a := range k.attempts {
		if a.end > from {
			moved[i] = len(kept)
			kept = append(kept, a)
		}
	}
	k.attempts = kept
	for _, ps := range s.procs {
		if ps.attemptKey == k {
			ps.attemptIdx = moved[ps.attemptIdx]
		}
		// Leases granted since the point of rest name their acquires too.
		for i := range ps.held {
			if l := &ps.held[i]; l.key == k {
				l.attempt = movedOr(moved, l.attempt)
			}
		}
		if ps.hasReleasing && ps.releasing.key == k {
			ps.releasing.attempt = movedOr(moved, ps.releasing.attempt)
		}
	}
}

// movedOr is where the acquire at index i went, or -1 when it was dropped
// (or was none).
func movedOr(moved map[int]int, i int) int {
	if j, ok := moved[i]; ok {
		return j
	}
	return -1
}

// settleAll settles every key's last stretch, at the end of the history.
func (s *scanner) settleAll(f *facts) {
	s.pullResource(math.MaxInt64)
	for _, k := range f.keys {
		s.settle(k, never, never, true)
	}
}
