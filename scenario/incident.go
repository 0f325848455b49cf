package scenario

import (
	"fmt"
	"strings"
	"time"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/nemesis"
	"github.com/lockcheck/lockcheck/workloads"
)

// moments say a when-moment in the articles' words.
var moments = map[string]string{
	workloads.FailpointBeforeWrite:      "right after its lease check, before its write",
	workloads.FailpointBeforeLeaseCheck: "after its work, before its lease check",
	workloads.FailpointBeforeAcquire:    "before it asks for the lock",
	nemesis.MomentAcquired:              "as soon as it holds the lock",
	nemesis.MomentBareMajority:          "as soon as it holds the lock on a bare majority of the nodes",
	nemesis.MomentEmptyRelease:          "as soon as a release of its deletes nothing",
}

// Incident tells what the timeline is, in the terms of the accounts its
// faults come from, for a scenario's explain (the paragraph its report
// shows): each step ("one pause of c0 for 1s when it reaches before-write
// (right after its lease check, before its write), longer than its 500ms
// lease"), and, from res, a run of it that failed (nil: none at hand), the
// fault that broke the lease and what it met ("one clock jump of +20s on
// redlock-3 while c1 held the lock on a bare majority (redlock-1,
// redlock-3 and redlock-4), and c0 was granted it within that lease") and
// that run's verdict sentence.
func (f *File) Incident(res *checker.Result) string {
	// Steps alike but for their times are said once, with their times.
	var (
		phrases []string
		times   = map[string][]string{}
		count   = map[string]int{}
	)
	for _, st := range f.Timeline {
		p := f.stepPhrase(st)
		if count[p] == 0 {
			phrases = append(phrases, p)
		}
		count[p]++
		if st.When == nil && st.At > 0 {
			times[p] = append(times[p], st.At.D().String())
		}
	}
	var steps []string
	for _, p := range phrases {
		said := p
		if n := count[p]; n > 1 {
			said += ", " + numberWord(n) + " times"
		}
		if at := times[p]; len(at) > 0 {
			said += " at " + checker.JoinAnd(at)
		}
		steps = append(steps, said)
	}
	out := "The timeline has no fault at all."
	switch {
	case len(f.Timeline) == 0:
	case len(f.Timeline) == 1:
		out = "The timeline is one " + steps[0] + "."
	default:
		for i, st := range steps {
			steps[i] = article(st) + " " + st
		}
		out = fmt.Sprintf("The timeline is %s: %s.", countWord(len(f.Timeline), "step"), checker.JoinAnd(steps))
	}
	if res == nil || res.Valid != checker.Invalid {
		return out
	}
	if ev := res.Checks.LeaseSafety.Evidence; len(ev) > 0 {
		if fault := checker.LeaseFault(res, ev[0]); fault != nil {
			out += " In a run of it, that was " + f.leaseFaultPhrase(*fault, ev[0]) + "."
		}
	}
	if res.Reason != "" {
		out += " That run's verdict: " + res.Reason
	}
	return out
}

// stepPhrase says one step, without its article: "pause of c0 for 1s when
// it reaches before-write (...)".
func (f *File) stepPhrase(st Step) string {
	var s string
	switch st.Do {
	case "pause":
		s = "pause of " + st.Target
		if st.For > 0 {
			s += " for " + st.For.D().String()
		}
	case "clock":
		s = "clock jump of " + signed(st.Offset.D()) + " on " + st.Target
		if st.Offset == 0 {
			s = "clock reset on " + st.Target
		} else if st.For > 0 {
			s += " for " + st.For.D().String()
		}
	case "restart":
		s = "restart of " + st.Target
		if st.Wipe {
			s += " with its data wiped"
		}
	case "fault":
		s = st.Fault + " fault"
		if help := nemesis.Help(st.Fault); help != "" {
			s += " (" + help + ")"
		}
	default:
		s = st.Do + " of " + st.Target
	}
	switch {
	case st.When != nil:
		who := st.When.Client
		switch who {
		case st.Target:
			who = "it"
		case nemesis.AnyClient:
			who = "any client"
		}
		s += " when " + who + " reaches " + st.When.Reaches
		if m, ok := moments[st.When.Reaches]; ok {
			if st.When.Node != "" {
				m += ", " + st.When.Node + " among them"
			}
			s += " (" + m + ")"
		}
	}
	switch {
	case st.Do != "pause":
	case st.For > f.TTL || st.For == 0:
		s += ", longer than its " + f.TTL.D().String() + " lease"
	case st.For == f.TTL:
		s += ", as long as its " + f.TTL.D().String() + " lease"
	}
	return s
}

// leaseFaultPhrase says the fault that broke lease v and whose lease it
// broke: "one clock jump of +20s on redlock-3 while c1 held a bare
// majority (...)".
func (f *File) leaseFaultPhrase(fault checker.Fault, v checker.LeaseViolation) string {
	var s string
	switch fault.Kind {
	case history.NemClockJump:
		s = "one clock jump of " + fault.Detail + " on " + fault.Target
	case history.NemKill:
		s = "one kill of " + fault.Target
	default:
		s = "one " + fault.Kind + " of " + fault.Target
	}
	s += " while " + v.Earlier.Process.String() + " held the lock"
	if held := len(v.Earlier.Nodes); held > 0 {
		if held == f.nodes()/2+1 {
			s += " on a bare majority"
		} else {
			s += fmt.Sprintf(" on %d of %d nodes", held, f.nodes())
		}
		s += " (" + checker.JoinAnd(v.Earlier.Nodes) + ")"
	}
	return s + ", and " + v.Later.Process.String() + " was granted it within that lease"
}

// nodes is how many nodes the scenario's service has.
func (f *File) nodes() int {
	b := f.target
	if b.Nodes == nil {
		// A scenario built in code rather than parsed names a backend
		// of the catalog.
		b, _, _ = catalog.Lookup(f.Backend, f.Variant)
	}
	if b.Nodes == nil {
		return 0
	}
	return len(b.Nodes(catalog.Programs{}, f.Params))
}

// signed writes a duration with its sign: "+20s", "-2s".
func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}

// article is the indefinite article of a phrase: "a pause", "an etcd-...".
func article(phrase string) string {
	if phrase != "" && strings.ContainsRune("aeiou", rune(phrase[0])) {
		return "an"
	}
	return "a"
}

// countWord says "two steps".
func countWord(n int, noun string) string {
	if n != 1 {
		noun += "s"
	}
	return numberWord(n) + " " + noun
}

// numberWord says a small number in words: "four".
func numberWord(n int) string {
	words := []string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}
	if n >= 0 && n < len(words) {
		return words[n]
	}
	return fmt.Sprint(n)
}
