package results

import (
	"fmt"

	"github.com/lockcheck/lockcheck/history"
)

// libraryLosses says, for each lock-lost event (a lock client program's
// library said it lost the lock, docs/clients.md), how late the library
// told the application: against the first grant of the key to another
// process after the lost grant, which is when the lock was certainly gone.
func libraryLosses(h *history.History) []string {
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
	var out []string
	for _, e := range h.Events {
		if e.F != history.NemLockLost || e.Value == nil {
			continue
		}
		lost, ok := byToken[e.Value.Token]
		if !ok {
			out = append(out, fmt.Sprintf("%s's library said it lost %s (%s), for a grant the history does not hold", e.Value.Target, e.Key, e.Value.Detail))
			continue
		}
		line := fmt.Sprintf("%s's library said it lost %s (%s) before any other client was granted it", lost.process, e.Key, e.Value.Detail)
		for _, g := range grants {
			if g.key != lost.key || g.process == lost.process || g.at <= lost.at {
				continue
			}
			if e.Time >= g.at {
				line = fmt.Sprintf("%s's library said it lost %s (%s) %s after %s was granted it", lost.process, e.Key, e.Value.Detail, ms(e.Time-g.at), g.process)
			} else {
				line = fmt.Sprintf("%s's library said it lost %s (%s) %s before %s was granted it", lost.process, e.Key, e.Value.Detail, ms(g.at-e.Time), g.process)
			}
			break
		}
		out = append(out, line)
	}
	return out
}

func ms(ns int64) string { return fmt.Sprintf("%.0f ms", float64(ns)/1e6) }
