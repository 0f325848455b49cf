package checker

import (
	"strings"

	"github.com/lockcheck/lockcheck/history"
)

// A lock bound to a server session (a PostgreSQL advisory lock: its acquire
// ok names the session) has no TTL. Its lease ends when its holder
// releases it or when the session ends: a landed kill-session of the
// session, a kill of the node that serves it or of the client that opened
// it, or the holder giving up (an operation with an unknown outcome: the
// client drops its session then, so the lease may have ended as early as
// that operation's invoke). A pooler the session's statements go through
// (the grant's via) ends it by dying too. See docs/history.md.

// sessionEnds are the moments faults ended server sessions, as far as the
// scan has read. The scan reads a history once, in order, and whether a
// kill-session landed is recorded after it (a "missed" event follows one
// that did not), so a kill cuts the leases of its session at once and a
// miss puts them back. The nemesis holds the client parked between the two
// events, so no release of that client falls between them.
type sessionEnds struct {
	bySession map[string][]int64 // landed kill-session events
	byNode    map[string][]int64 // kills of a node: every session on it ends
	// undo is, per session, the leases its latest kill cut short, with
	// their expiry before it.
	undo map[string][]sessionUndo
}

// sessionUndo is a held lease a kill-session cut, and its expiry before.
type sessionUndo struct {
	ps     *procState
	key    *keyFacts
	idx    int
	expiry int64
}

func newSessionEnds() sessionEnds {
	return sessionEnds{bySession: map[string][]int64{}, byNode: map[string][]int64{}, undo: map[string][]sessionUndo{}}
}

// observe takes a nemesis event as the scan reads it: a kill of a session
// or of a node ends the session leases the processes hold on it.
func (s *sessionEnds) observe(e *history.Event, procs map[history.Process]*procState) {
	if e.Value == nil {
		return
	}
	switch e.F {
	case history.NemKillSession:
		session := e.Value.Session
		if strings.HasPrefix(e.Value.Detail, history.MissedPrefix) {
			// The kill recorded just before it did not land.
			if ts := s.bySession[session]; len(ts) > 0 {
				s.bySession[session] = ts[:len(ts)-1]
			}
			for _, u := range s.undo[session] {
				if h := u.ps.heldGrant(u.key, u.idx); h != nil {
					h.expiry = u.expiry
				}
			}
			delete(s.undo, session)
			return
		}
		s.bySession[session] = append(s.bySession[session], e.Time)
		s.undo[session] = nil
		s.cut(procs, e.Time, func(g *Grant) bool { return g.Session == session }, func(u sessionUndo) {
			s.undo[session] = append(s.undo[session], u)
		})
	case history.NemKill:
		if _, client := clientTarget(e.Value); client {
			return
		}
		node := e.Value.Target
		s.byNode[node] = append(s.byNode[node], e.Time)
		s.cut(procs, e.Time, func(g *Grant) bool {
			n, _, _ := strings.Cut(g.Session, "/")
			return g.Session != "" && (n == node || g.Via == node)
		}, func(sessionUndo) {})
	}
}

// cut ends, at at, every held lease whose grant matches and that was still
// live then, telling undo what it was before.
func (s *sessionEnds) cut(procs map[history.Process]*procState, at int64, match func(*Grant) bool, undo func(sessionUndo)) {
	for _, ps := range procs {
		for i := range ps.held {
			h := &ps.held[i]
			if g := h.grant(); match(g) && h.expiry > at {
				undo(sessionUndo{ps: ps, key: h.key, idx: h.idx, expiry: h.expiry})
				h.expiry = at
			}
		}
	}
}

// end is the first moment at or after from at which a fault ended session
// (node/pid, its statements going via a node or none) among those read so
// far, else after.
func (s sessionEnds) end(session, via string, from, after int64) int64 {
	end := after
	node, _, _ := strings.Cut(session, "/")
	for _, ts := range [][]int64{s.bySession[session], s.byNode[node], s.byNode[via]} {
		for _, t := range ts {
			if t >= from && t < end {
				end = t
			}
		}
	}
	return end
}

// endSessions ends the session leases ps holds no later than at: their
// holder was killed or gave up, and its session with it.
func endSessions(ps *procState, at int64) {
	for i := range ps.held {
		if ps.held[i].grant().Session != "" {
			ps.held[i].expiry = min(ps.held[i].expiry, at)
		}
	}
}

// heldGrant is the lease ps still holds for grant idx of key, or nil.
func (ps *procState) heldGrant(key *keyFacts, idx int) *heldLease {
	for i := range ps.held {
		if ps.held[i].key == key && ps.held[i].idx == idx {
			return &ps.held[i]
		}
	}
	return nil
}
