package results

import (
	"fmt"

	"github.com/lockcheck/lockcheck/history"
)

// LibraryLoss is a lock-lost event (a lock client program's library said it
// lost the lock, docs/clients.md) and how late the library told the
// application: against the first grant of the key to another process after
// the lost grant, which is when the lock was certainly gone. It is
// results.json's library_losses[] (docs/results.md).
type LibraryLoss struct {
	Key string `json:"key"`
	// Client is the event's target: the process of the lost grant when the
	// history holds it (Known), else what the event named.
	Client string `json:"client"`
	Known  bool   `json:"known"`
	Detail string `json:"detail,omitempty"`
	// AtMs is when the library said so, from the history's first event.
	AtMs float64 `json:"at_ms"`
	// GrantedTo is the process of that next grant, and LateMs how long
	// after it the library said so (negative: before it); both absent when
	// no other process was granted the key after the lost grant.
	GrantedTo *history.Process `json:"granted_to,omitempty"`
	LateMs    *float64         `json:"late_ms,omitempty"`
}

// libraryLosses finds every lock-lost event of h and how late it came.
func libraryLosses(h *history.History) []LibraryLoss {
	type grant struct {
		process history.Process
		key     string
		at      int64
	}
	byToken := map[string]grant{}
	var grants []grant
	for _, e := range h.Events {
		if e.Type == history.OK && e.F == history.FAcquire && e.Value != nil {
			g := grant{e.Process, e.Key, e.Time}
			byToken[e.Value.Token] = g
			grants = append(grants, g)
		}
	}
	var out []LibraryLoss
	for _, e := range h.Events {
		if e.F != history.NemLockLost || e.Value == nil {
			continue
		}
		l := LibraryLoss{Key: e.Key, Client: e.Value.Target, Detail: e.Value.Detail, AtMs: float64(e.Time-h.Events[0].Time) / 1e6}
		lost, ok := byToken[e.Value.Token]
		if ok {
			l.Client, l.Known = lost.process.String(), true
			for _, g := range grants {
				if g.key == lost.key && g.process != lost.process && g.at > lost.at {
					l.GrantedTo, l.LateMs = &g.process, new(float64(e.Time-g.at)/1e6)
					break
				}
			}
		}
		out = append(out, l)
	}
	return out
}

// Line says it in words, for the summary and the report.
func (l LibraryLoss) Line() string {
	said := fmt.Sprintf("%s's library said it lost %s (%s)", l.Client, l.Key, l.Detail)
	switch {
	case !l.Known:
		return said + ", for a grant the history does not hold"
	case l.GrantedTo == nil:
		return said + " before any other client was granted it"
	case *l.LateMs >= 0:
		return fmt.Sprintf("%s %.0f ms after %s was granted it", said, *l.LateMs, *l.GrantedTo)
	}
	return fmt.Sprintf("%s %.0f ms before %s was granted it", said, -*l.LateMs, *l.GrantedTo)
}
