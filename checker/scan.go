package checker

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/lockcheck/lockcheck/history"
)

// never is the completion time of an operation that never completed.
const never = math.MaxInt64

// attempt is one acquire: from invoke to its completion, or to the moment
// its process was killed; never when neither came.
type attempt struct {
	invoke int64
	end    int64
}

// readOp is a read that returned a value.
type readOp struct {
	process history.Process
	call    int64 // read invoke time
	ret     int64 // read ok time
	value   int64
}

// writeOp is one write attempt, with the read its value was computed from.
type writeOp struct {
	process history.Process
	index   int64 // history index of the write invoke
	invoke  int64
	value   *int64
	read    *int64 // the value the client says it computed from
	fence   *int64
	req     string
	// from is the process's read before this write, when there was one.
	from    readOp
	hasFrom bool
	// status is the completion's type; empty while it never completed.
	status    history.Type
	done      int64
	doneIndex int64
	accepted  *bool
	prev      *int64
}

// keyFacts is everything the checks need about one lock key.
type keyFacts struct {
	key      string
	grants   []Grant
	attempts []attempt
	writes   []writeOp
	reads    []readOp // reads with no write after them: read-only operations
}

// facts is one pass over a history, grouped per key.
type facts struct {
	span      Interval
	runEnd    int64
	hasRunEnd bool
	faults    []Fault
	nemesis   []*history.Event
	keys      []*keyFacts // sorted by key

	acquireFailed  int
	acquireRefused int
	acquireUnknown int
}

// procState follows one client process through the history.
type procState struct {
	invoke     *history.Event // pending invoke
	attemptKey *keyFacts      // key of the pending acquire
	attemptIdx int

	grantKey *keyFacts // key of the grant the process believes it holds
	grantIdx int
	expiry   int64 // earliest possible expiry of that grant so far

	read    readOp // last read not yet followed by a write
	readKey *keyFacts
	hasRead bool

	writeKey *keyFacts // key of the pending write
	writeIdx int
}

type scanner struct {
	cfg       history.RunConfig
	allowance func(ttlMs int64) int64
	facts     facts
	keys      map[string]*keyFacts
	procs     map[history.Process]*procState
	sessions  sessionEnds
}

// scan reads the history once and collects grants, acquire attempts, writes,
// reads and faults per key.
func scan(h *history.History, allowance func(ttlMs int64) int64) *facts {
	s := &scanner{
		cfg:       h.Header.Config,
		allowance: allowance,
		keys:      map[string]*keyFacts{},
		procs:     map[history.Process]*procState{},
	}
	s.facts.span = span(h)
	s.sessions = collectSessionEnds(h.Events)
	for i := range h.Events {
		e := &h.Events[i]
		switch {
		case e.Process == history.Nemesis:
			s.nemesis(e)
		case e.Type == history.Invoke:
			s.invoke(e)
		default:
			s.complete(e)
		}
	}
	s.finish()
	s.facts.faults = collectFaults(s.facts.nemesis, s.facts.span.End)
	s.facts.keys = slices.SortedFunc(maps.Values(s.keys), func(a, b *keyFacts) int { return strings.Compare(a.key, b.key) })
	return &s.facts
}

// span bounds the history by its earliest and latest event; a history with
// no events is the point of its header's start.
func span(h *history.History) Interval {
	if len(h.Events) == 0 {
		return Interval{Start: h.Header.StartTime, End: h.Header.StartTime}
	}
	sp := Interval{Start: h.Events[0].Time, End: h.Events[0].Time}
	for i := range h.Events {
		sp.Start = min(sp.Start, h.Events[i].Time)
		sp.End = max(sp.End, h.Events[i].Time)
	}
	return sp
}

func (s *scanner) key(name string) *keyFacts {
	k, ok := s.keys[name]
	if !ok {
		k = &keyFacts{key: name}
		s.keys[name] = k
	}
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
	switch e.F {
	case history.NemRunEnd:
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
		// A killed client believes nothing any more and tries nothing.
		s.endSession(ps, e.Time)
		s.endBelief(ps, e.Time)
		s.flushRead(ps)
		if ps.attemptKey != nil {
			ps.attemptKey.attempts[ps.attemptIdx].end = e.Time
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
	ps.invoke = e
	switch e.F {
	case history.FAcquire:
		s.flushRead(ps)
		// A client that asks for the lock again no longer relies on the
		// grant it had.
		s.endBelief(ps, e.Time)
		k := s.key(e.Key)
		k.attempts = append(k.attempts, attempt{invoke: e.Time, end: never})
		ps.attemptKey, ps.attemptIdx = k, len(k.attempts)-1
	case history.FRelease:
		s.flushRead(ps)
		if ps.grantKey != nil {
			g := &ps.grantKey.grants[ps.grantIdx]
			g.BeliefEnd = e.Time
			g.CertainEnd = min(e.Time, ps.expiry)
			ps.grantKey = nil
		}
	case history.FRead:
		s.flushRead(ps)
	case history.FWrite:
		k := s.key(e.Key)
		w := writeOp{process: e.Process, index: e.Index, invoke: e.Time}
		if v := e.Value; v != nil {
			w.value, w.read, w.fence, w.req = v.Value, v.Read, v.Fence, v.Req
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
	inv := ps.invoke
	ps.invoke = nil
	if inv == nil {
		return // history.Read rejects this; a hand-built history may not
	}
	switch inv.F {
	case history.FAcquire:
		s.completeAcquire(ps, inv, e)
	case history.FExtend:
		// An extend that found the lease no longer the client's (accepted
		// false) pushes nothing out.
		if e.Type == history.OK && ps.grantKey != nil && (e.Value == nil || e.Value.Accepted == nil || *e.Value.Accepted) {
			g := &ps.grantKey.grants[ps.grantIdx]
			ttl := ttlOf(e.Value, inv.Value, g.TTLms)
			ps.expiry = max(ps.expiry, s.expiry(inv.Time, ttl))
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
				w.accepted, w.prev = e.Value.Accepted, e.Value.Prev
			}
			ps.writeKey = nil
		}
	}
	if e.Type == history.Info {
		// The process retires: it no longer believes it holds the lock.
		s.endSession(ps, inv.Time)
		s.endBelief(ps, e.Time)
		s.flushRead(ps)
	}
}

func (s *scanner) completeAcquire(ps *procState, inv, e *history.Event) {
	k := ps.attemptKey
	ps.attemptKey = nil
	if k != nil {
		k.attempts[ps.attemptIdx].end = e.Time
	}
	switch e.Type {
	case history.Fail:
		if strings.HasPrefix(e.Error, history.RefusedPrefix) {
			s.facts.acquireRefused++
		} else {
			s.facts.acquireFailed++
		}
		return
	case history.Info:
		s.facts.acquireUnknown++
		return
	}
	if k == nil {
		k = s.key(inv.Key)
	}
	g := Grant{Key: k.key, Process: e.Process, Invoke: inv.Time, OK: e.Time, Index: e.Index}
	g.TTLms = ttlOf(e.Value, inv.Value, s.cfg.TTLms)
	if e.Value != nil {
		g.Fence, g.Nodes, g.Session = e.Value.Fence, e.Value.Nodes, e.Value.Session
	}
	if g.Session != "" {
		g.TTLms = 0 // a session lock has no TTL: the run's --ttl is not its lease
	}
	k.grants = append(k.grants, g)
	ps.grantKey, ps.grantIdx = k, len(k.grants)-1
	ps.expiry = s.expiry(inv.Time, g.TTLms)
	if g.Session != "" {
		ps.expiry = s.sessions.end(g.Session, inv.Time, ps.expiry)
	}
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
		return s.facts.span.End + 1
	}
	return invoke + ttlMs*1e6 - s.allowance(ttlMs)
}

// endBelief closes the grant ps believes it holds, without a release: the
// lease then lasts until it expires.
func (s *scanner) endBelief(ps *procState, at int64) {
	if ps.grantKey == nil {
		return
	}
	g := &ps.grantKey.grants[ps.grantIdx]
	g.BeliefEnd = at
	g.CertainEnd = ps.expiry
	ps.grantKey = nil
}

// flushRead records a read that no write followed as a read-only operation.
func (s *scanner) flushRead(ps *procState) {
	if ps.hasRead {
		ps.readKey.reads = append(ps.readKey.reads, ps.read)
		ps.hasRead = false
	}
}

func (s *scanner) finish() {
	for _, ps := range s.procs {
		s.endBelief(ps, s.facts.span.End)
		s.flushRead(ps)
		if ps.attemptKey != nil {
			s.facts.acquireUnknown++
		}
	}
}
