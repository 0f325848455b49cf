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
// that operation's invoke). See docs/postgres-model.md.

// sessionEnds are the moments faults ended server sessions.
type sessionEnds struct {
	bySession map[string][]int64 // landed kill-session events
	byNode    map[string][]int64 // kills of a node: every session on it ends
}

// collectSessionEnds reads the faults that end sessions from the whole
// history first: whether a kill-session landed is recorded after it.
func collectSessionEnds(events []history.Event) sessionEnds {
	s := sessionEnds{bySession: map[string][]int64{}, byNode: map[string][]int64{}}
	missed := map[string]bool{}
	for i := range events {
		e := &events[i]
		if e.Process != history.Nemesis || e.Value == nil {
			continue
		}
		switch e.F {
		case history.NemKillSession:
			if strings.HasPrefix(e.Value.Detail, history.MissedPrefix) {
				missed[e.Value.Session] = true
				// The kill recorded just before it did not land.
				if ts := s.bySession[e.Value.Session]; len(ts) > 0 {
					s.bySession[e.Value.Session] = ts[:len(ts)-1]
				}
				continue
			}
			s.bySession[e.Value.Session] = append(s.bySession[e.Value.Session], e.Time)
		case history.NemKill:
			if _, client := clientTarget(e.Value); !client {
				s.byNode[e.Value.Target] = append(s.byNode[e.Value.Target], e.Time)
			}
		}
	}
	return s
}

// end is the first moment at or after from at which a fault ended session
// (node/pid), else after the history.
func (s sessionEnds) end(session string, from, after int64) int64 {
	end := after
	node, _, _ := strings.Cut(session, "/")
	for _, ts := range [][]int64{s.bySession[session], s.byNode[node]} {
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
