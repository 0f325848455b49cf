package checker

import (
	"cmp"
	"math"
	"regexp"
	"slices"

	"github.com/lockcheck/lockcheck/history"
)

// Acquires that got no answer. A run whose acquires mostly ended in an
// error or an unknown outcome, while nothing was wrong with the service,
// tested almost nothing: a grant or two among thousands of errors (a
// client whose every statement a pooler refuses) is no pass. An acquire
// made while a fault on a node, or on its own client, was in force is left
// out: a node that is down refuses connections, a partition times
// requests out, and a kill cuts an acquire short, by design; a refusal
// (busy, or a service that will not write: NOREPLICAS) is an answer.

// quietAcquires counts the acquires made with no such fault in force, those
// of them that got no answer, and their errors.
type quietAcquires struct {
	n, unanswered int
	errors        []acquireError // by first appearance, at most maxErrorKinds
	others        int            // unanswered acquires whose error is not among them
}

// acquireError is one kind of error of acquires that got no answer: the
// text of its first, how many there were, and when the first came.
type acquireError struct {
	kind  string // the text with its numbers and hex runs blanked
	text  string
	count int
	first int64
}

// maxErrorKinds bounds the kinds of errors kept, so that a history of ever
// new error texts does not grow them with its length.
const maxErrorKinds = 64

// errorNumbers are the parts of an error text that differ between two
// errors of one kind: ports, pids, hashes.
var errorNumbers = regexp.MustCompile(`[0-9a-fA-F]{6,}|[0-9]+`)

// add counts one acquire made with no fault in force; for one that got no
// answer, its error text and when it ended (never: it never did).
func (q *quietAcquires) add(answered bool, text string, at int64) {
	q.n++
	if answered {
		return
	}
	q.unanswered++
	if text == "" {
		text = "no answer"
		if at == never {
			text = "no answer by the end of the history"
		}
	}
	kind := errorNumbers.ReplaceAllString(text, "#")
	for i := range q.errors {
		if e := &q.errors[i]; e.kind == kind {
			e.count++
			return
		}
	}
	if len(q.errors) == maxErrorKinds {
		q.others++
		return
	}
	q.errors = append(q.errors, acquireError{kind: kind, text: text, count: 1, first: at})
}

// mostlyUnanswered says whether more than half of the acquires made with
// no fault in force got no answer.
func (q *quietAcquires) mostlyUnanswered() bool { return q.unanswered > 0 && 2*q.unanswered > q.n }

// common is the most common kind of error, the earliest first among equals.
func (q *quietAcquires) common() acquireError {
	var best acquireError
	for _, e := range q.errors {
		if e.count > best.count || e.count == best.count && e.first < best.first {
			best = e
		}
	}
	return best
}

// AcquireError is one kind of error of the acquires that got no answer.
type AcquireError struct {
	Error   string  `json:"error"`
	Count   int     `json:"count"`
	FirstMs float64 `json:"first_ms"` // from the start of the history; -1 for one that never came back
}

// maxAcquireErrors is how many kinds results.json lists.
const maxAcquireErrors = 5

// errorsOf lists the commonest kinds of q's errors, t0 the history's start.
func errorsOf(q *quietAcquires, t0 int64) []AcquireError {
	kinds := slices.Clone(q.errors)
	slices.SortStableFunc(kinds, func(a, b acquireError) int {
		return cmp.Or(cmp.Compare(b.count, a.count), cmp.Compare(a.first, b.first))
	})
	var out []AcquireError
	for _, e := range kinds[:min(len(kinds), maxAcquireErrors)] {
		first := -1.0
		if e.first != never {
			first = ms(e.first - t0)
		}
		out = append(out, AcquireError{Error: e.text, Count: e.count, FirstMs: first})
	}
	return out
}

// faultsInForce follows, event by event, the faults the nemesis has
// started and not healed, and when each target's last one ended, as the
// verb table says (history.VerbOf): enough to tell whether a fault on a
// node or on a client was in force during an acquire that just ended.
type faultsInForce struct {
	open    map[string]string // verb + target of a fault in force -> its target
	nodes   int               // faults in force on nodes
	clients map[string]int    // faults in force on each client
	// nodesEnded and clientEnded are when the last fault on a node, and
	// on each client, ended (a point fault ends where it starts).
	nodesEnded  int64
	clientEnded map[string]int64
}

func newFaultsInForce() faultsInForce {
	return faultsInForce{open: map[string]string{}, clients: map[string]int{}, nodesEnded: math.MinInt64, clientEnded: map[string]int64{}}
}

// onClient says whether target names a client process (c3).
func onClient(target string) bool {
	p, ok := clientTarget(&history.Value{Target: target})
	return ok && p.String() == target
}

func (f *faultsInForce) observe(e *history.Event) {
	target := ""
	if e.Value != nil {
		target = e.Value.Target
	}
	end := func(verb string) {
		key := verb + " " + target
		if _, ok := f.open[key]; !ok {
			return
		}
		delete(f.open, key)
		f.ended(target, e.Time)
		if onClient(target) {
			f.clients[target]--
		} else {
			f.nodes--
		}
	}
	switch v := history.VerbOf(e.F); v.Role {
	case history.Observes:
	case history.Heals:
		end(v.Heals)
	case history.Starts:
		for _, ended := range v.Ends {
			end(ended)
		}
		key := e.F + " " + target
		if _, ok := f.open[key]; ok {
			return
		}
		f.open[key] = target
		if onClient(target) {
			f.clients[target]++
		} else {
			f.nodes++
		}
		// A kill no one heals (a client's) is a moment: it is in force
		// during the acquire it cut short, as a point.
		if !v.UntilEnd {
			f.ended(target, e.Time)
		}
	default:
		f.ended(target, e.Time)
	}
}

func (f *faultsInForce) ended(target string, t int64) {
	if onClient(target) {
		f.clientEnded[target] = max(f.clientEnded[target], t)
	} else {
		f.nodesEnded = max(f.nodesEnded, t)
	}
}

// during says whether a fault on a node or on process p was in force at
// some moment since invoke, up to now.
func (f *faultsInForce) during(p history.Process, invoke int64) bool {
	client := p.String()
	if f.nodes > 0 || f.clients[client] > 0 || f.nodesEnded >= invoke {
		return true
	}
	t, ok := f.clientEnded[client]
	return ok && t >= invoke
}
