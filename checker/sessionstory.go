package checker

import (
	"fmt"
	"strings"

	"github.com/lockcheck/lockcheck/history"
)

// ServerSessions is the evidence of locks bound to server sessions (a
// PostgreSQL advisory lock, MariaDB's GET_LOCK: the acquire ok names the
// session) whose session was not the one their client took it to be. A
// pooler in transaction mode runs each statement on whichever server
// connection is free: an unlock lands on a session that holds nothing, and
// the session that holds the lock goes on holding it for no one. The
// release ok events and the end-of-run inspection name their sessions
// (docs/history.md).
type ServerSessions struct {
	// MovedReleases counts the releases that ran on another server session
	// than their grant; FirstMoved is the first of them.
	MovedReleases int           `json:"moved_releases"`
	FirstMoved    *MovedRelease `json:"first_moved_release,omitempty"`
	// Stranded are the locks a server session still held at the end of
	// the run, when no client held them any more.
	Stranded []StrandedLock `json:"stranded,omitempty"`
}

// MovedRelease is a release that ran on another server session than its
// grant.
type MovedRelease struct {
	Key            string          `json:"key"`
	Process        history.Process `json:"process"`
	Time           int64           `json:"time"` // the release's invoke
	GrantSession   string          `json:"grant_session"`
	ReleaseSession string          `json:"release_session"`
	// Released is what the unlock reported: false when the session it ran
	// on held nothing.
	Released bool `json:"released"`
}

// StrandedLock is a lock a server session held at the end of the run.
type StrandedLock struct {
	Key     string `json:"key"`
	Session string `json:"session"`
	Time    int64  `json:"time"` // of the inspection
	// Grant is the last grant made on that session, nil when no grant of
	// the run named it; Release is how its client let it go: a release
	// that ran elsewhere (Moved), one that ended in Error, or none.
	Grant   *SessionGrant `json:"grant,omitempty"`
	Release *MovedRelease `json:"release,omitempty"`
	Error   string        `json:"release_error,omitempty"`
}

// SessionGrant is the grant a stranded lock's session was given last.
type SessionGrant struct {
	Process history.Process `json:"process"`
	OK      int64           `json:"ok"`    // the acquire ok's time
	Index   int64           `json:"index"` // the acquire ok's history index
}

// sessionTrack is what the scan keeps of a session's last grant of a key
// and how its client let it go.
type sessionTrack struct {
	grant   Grant
	release *MovedRelease
	err     string
}

// sessionStory follows the grants of locks bound to server sessions, per
// key and session, as the scan reads them.
type sessionStory struct {
	res    ServerSessions
	tracks map[string]map[string]*sessionTrack
}

func (st *sessionStory) granted(g Grant) {
	if g.Session == "" {
		return
	}
	if st.tracks == nil {
		st.tracks = map[string]map[string]*sessionTrack{}
	}
	if st.tracks[g.Key] == nil {
		st.tracks[g.Key] = map[string]*sessionTrack{}
	}
	st.tracks[g.Key][g.Session] = &sessionTrack{grant: g}
}

// released takes the completion e of the release, invoked at, of grant g.
func (st *sessionStory) released(g *Grant, at int64, e *history.Event) {
	if g.Session == "" {
		return
	}
	tr := st.tracks[g.Key][g.Session]
	if tr != nil && tr.grant.Process != g.Process {
		tr = nil // another client was granted the lock on that session since
	}
	if e.Type != history.OK {
		if tr != nil {
			tr.err = e.Error
			if tr.err == "" {
				tr.err = "unknown outcome"
			}
		}
		return
	}
	on := ""
	if e.Value != nil {
		on = e.Value.Session
	}
	if on == "" || on == g.Session {
		// Released where it was granted; a session that still holds the
		// key at the end held it more than once (re-entrant grants).
		if tr != nil {
			tr.release, tr.err = nil, ""
		}
		return
	}
	m := &MovedRelease{Key: g.Key, Process: g.Process, Time: at, GrantSession: g.Session, ReleaseSession: on, Released: confirmed(e.Value)}
	st.res.MovedReleases++
	if st.res.FirstMoved == nil {
		st.res.FirstMoved = m
	}
	if tr != nil {
		tr.release = m
	}
}

// inspected takes an inspection that named the session holding a key.
func (st *sessionStory) inspected(e *history.Event) {
	if e.Value == nil || e.Value.Session == "" {
		return
	}
	s := StrandedLock{Key: e.Value.Target, Session: e.Value.Session, Time: e.Time}
	if tr := st.tracks[s.Key][s.Session]; tr != nil {
		g := SessionGrant{Process: tr.grant.Process, OK: tr.grant.OK, Index: tr.grant.Index}
		s.Grant, s.Release, s.Error = &g, tr.release, tr.err
	}
	st.res.Stranded = append(st.res.Stranded, s)
}

// result is nil when no lock was bound to a session that went astray.
func (st *sessionStory) result() *ServerSessions {
	if st.res.MovedReleases == 0 && len(st.res.Stranded) == 0 {
		return nil
	}
	r := st.res
	return &r
}

// sessionPhrase tells the sessions' story in the user's words: "c2
// released lock-0 on server session pg-0/4711, but its grant was on
// pg-0/4702; pg-0/4702 still held it at the end"; empty when there is
// none.
func (x explainer) sessionPhrase() string {
	ss := x.r.Sessions
	if ss == nil {
		return ""
	}
	moved := func(m *MovedRelease) string {
		return fmt.Sprintf("%s released %s on server session %s, but its grant was on %s", m.Process, m.Key, m.ReleaseSession, m.GrantSession)
	}
	more := ""
	if ss.MovedReleases > 1 {
		more = fmt.Sprintf(" (%d releases in all ran on another session than their grant)", ss.MovedReleases)
	}
	if len(ss.Stranded) == 0 {
		return moved(ss.FirstMoved) + more
	}
	s := ss.Stranded[0]
	switch {
	case s.Release != nil:
		return moved(s.Release) + "; " + s.Session + " still held it at the end" + more
	case s.Grant != nil && s.Error != "":
		return fmt.Sprintf("%s's release of %s ended in an error (%s), and %s, the server session of its grant at %s, still held it at the end",
			s.Grant.Process, s.Key, shorten(s.Error, 100), s.Session, x.at(s.Grant.OK))
	case s.Grant != nil:
		return fmt.Sprintf("%s, the server session of %s's grant of %s at %s, still held it at the end, when no client did",
			s.Session, s.Grant.Process, s.Key, x.at(s.Grant.OK))
	}
	return fmt.Sprintf("server session %s still held %s at the end, when no client did", s.Session, s.Key)
}

// shorten cuts s to at most n bytes, at a word.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := s[:n]
	if i := strings.LastIndexByte(cut, ' '); i > n/2 {
		cut = cut[:i]
	}
	return cut + "…"
}
