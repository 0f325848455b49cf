package checker

import (
	"math"
	"time"

	"github.com/lockcheck/lockcheck/history"
)

// never is the completion time of an operation that never completed.
const never = math.MaxInt64

// attempt is one acquire: from invoke to its completion, or to the moment
// its process was killed; never when neither came. The rest is what the
// orphaned-lock rule reads (orphans.go): how it came out and, for a grant
// or an acquire of unknown outcome, the claim it gave its key.
type attempt struct {
	invoke int64
	end    int64

	process history.Process
	outcome attemptOutcome
	// ttl is the lease it asked for or was granted, in ms, the largest of
	// the grant's and its extends'; 0 is none.
	ttl int64
	// beliefEnd is, for a grant whose claim ended, when its holder stopped
	// believing it held the key (never: it still did when the history
	// ended): a pause of the holder within it ends a lease with a TTL.
	beliefEnd int64
	// claim is how its claim ended, once it did (claimed false until then:
	// a lease still held).
	claim   claimEnd
	claimed bool
	// swept says the orphan sweep has read it (a refusal is counted once).
	swept bool
}

// attemptOutcome is how an acquire came out.
type attemptOutcome uint8

const (
	attemptPending attemptOutcome = iota // no outcome yet
	attemptGranted
	attemptBusy    // refused: the lock was held
	attemptRefused // the service would not write at all (NOREPLICAS), or was never asked
	attemptUnknown // info, a kill, or no completion: it may have been granted
)

// claimEnd is when and how a claim of a key ended: the moment after which
// the service had nothing left to free on the claim's behalf, before any
// fault prolongs it (orphans.go). at is never for a claim that lasts to
// the end of the history.
type claimEnd struct {
	at  int64
	how claimEnding
	// event is the time of what ended it (the release's ok, the kill),
	// which at may lie a TTL after.
	event int64
}

// claimEnding says how a claim ended, for the orphaned lock's reason.
type claimEnding uint8

const (
	endedByRelease       claimEnding = iota // a release that deleted the key
	endedByEmptyRelease                     // a release the service said freed nothing (accepted false)
	endedByFailedRelease                    // a release that failed or whose outcome is unknown
	endedByKill                             // its holder was killed
	endedByRetirement                       // its holder gave up (an info outcome)
	endedBySession                          // its session was terminated, or its node killed
	endedByRegrant                          // its holder was granted the key again
	endedAtHistoryEnd                       // still held when the history ended
	endedAcquireKilled                      // an acquire killed before it returned
	endedAcquireUnknown                     // an acquire of unknown outcome (info)
	endedAcquirePending                     // an acquire that never returned
	endedWhilePaused                        // a lease with a TTL its holder's pause outlasted
)

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
// The scan holds them only until it settles them (settle.go).
type keyFacts struct {
	key      string
	grants   []Grant
	attempts []attempt
	writes   []writeOp
	reads    []readOp // reads with no write after them: read-only operations
	last     int64    // the latest event on the key
	settled  keySettled
	lanes    map[history.Process]int // the key's linearizability lanes
}

// facts is one pass over a history, grouped per key.
type facts struct {
	span      Interval
	runEnd    int64
	hasRunEnd bool
	faults    []Fault
	nemesis   []*history.Event
	keys      []*keyFacts // sorted by key
	// lastRunEnd is the last run-end event, nil when there is none.
	lastRunEnd *history.Event
	anyWrite   bool
	// writes counts the writes invoked; accepted counts those the history
	// shows accepted and the resource log's accepted entries (a write may
	// count twice: only whether any was accepted matters).
	writes, accepted int
	// quiet counts the acquires made while no fault on a node or on their
	// own client was in force, and what became of them (acquireerrors.go).
	quiet quietAcquires

	acquireAttempts int
	acquireFailed   int
	acquireRefused  int
	acquireNotSent  int
	acquireUnknown  int
}

// procState follows one client process through the history.
type procState struct {
	invoke     history.Event // pending invoke, a copy: events are streamed
	hasInvoke  bool
	attemptKey *keyFacts // key of the pending acquire
	attemptIdx int

	// held are the leases the process holds, one per key, usually none or
	// one. A lease stays held after a release that failed or deleted
	// nothing: the lock service still promises it until it expires.
	held []heldLease
	// releasing is the lease of the pending release, until its outcome
	// says whether it ended.
	releasing    heldLease
	releaseAt    int64 // invoke time of that release
	hasReleasing bool

	read    readOp // last read not yet followed by a write
	readKey *keyFacts
	hasRead bool

	writeKey *keyFacts // key of the pending write
	writeIdx int
}

// heldLease is a grant whose lease has not ended yet.
type heldLease struct {
	key    *keyFacts
	idx    int   // of the grant in key.grants
	expiry int64 // earliest possible expiry so far
	// believed is set while the client relies on it: until it invokes
	// release, retires or is killed.
	believed bool
	// before are the holder's earlier grants this one continues (a
	// re-entrant acquire that was granted), latest first.
	before []continued
	// attempt is the index in key.attempts of the acquire that won it, whose
	// claim ends when the lease does (claimEnds).
	attempt int
}

// continued is an earlier grant of a lease that a re-entrant grant took
// over. Its lease was certainly live until the new grant took effect (no
// earlier than the new grant's invoke, next) and the new grant's lease
// after that; but no longer than its own expiry, cap, when that may have
// come before the new grant.
type continued struct {
	idx  int
	cap  int64
	next int64
}

func (l heldLease) grant() *Grant { return &l.key.grants[l.idx] }

// claimEnds ends the claim of the acquire that won l, unless it ended
// already: a lease with a TTL is let go by the service at a release that
// deleted it, else at the latest a TTL after its holder stopped relying on
// it (beliefEnd) or after the grant, whichever is later; one without a TTL
// at the holder's own end (a release answered, its death, its giving up:
// at), or when its session ended first. Claims are docs/history.md's
// "Orphaned locks".
func (l heldLease) claimEnds(how claimEnding, at, beliefEnd int64) {
	if l.attempt < 0 {
		return // won by an acquire the history had already given up on
	}
	a := &l.key.attempts[l.attempt]
	if a.claimed {
		return
	}
	g := l.grant()
	end := claimEnd{at: at, how: how, event: at}
	switch {
	case a.ttl > 0 && how != endedByRelease:
		_, end.at = history.LeaseEnds(g.Invoke, max(g.OK, beliefEnd), time.Duration(a.ttl)*time.Millisecond, 0)
		if at == never {
			end.at = never
		}
	case a.ttl <= 0 && l.expiry < noExpiry && l.expiry < at:
		end = claimEnd{at: l.expiry, how: endedBySession, event: l.expiry}
	}
	a.claim, a.claimed, a.beliefEnd = end, true, beliefEnd
}

// end ends the lease at the earliest of at and its expiry, and the client's
// belief at believedUntil if it still believed; the earlier grants it
// continued end with it.
func (l heldLease) end(at, believedUntil int64) {
	g := l.grant()
	if l.believed {
		g.BeliefEnd = believedUntil
	}
	g.CertainEnd = min(at, l.expiry)
	end := g.CertainEnd
	for _, c := range l.before {
		end = min(c.cap, max(c.next, end))
		l.key.grants[c.idx].CertainEnd = end
	}
}
