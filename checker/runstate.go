package checker

import (
	"fmt"
	"strings"

	"github.com/lockcheck/lockcheck/history"
)

// How a run ended, as its history tells: the harness writes a run-end event
// as the last event of every run it finishes, with detail "interrupted"
// (or "interrupted: <why>") when the run stopped before its time limit. A
// history whose header names when it started is a run's (lockcheck run's,
// or a recorder's of another program that follows its rules); one that has
// no run-end was cut short: its recorder was killed, or could not write.
// Deriving this from the history, not from the harness, is what makes a
// run and a later `lockcheck check` of its directory agree.

// runEnding reads how the run of a history ended: its header hd and the
// last run-end event the scan saw.
func runEnding(hd history.Header, f *facts) (interrupted, incomplete bool, why string) {
	if e := f.lastRunEnd; e != nil {
		detail := ""
		if e.Value != nil {
			detail = e.Value.Detail
		}
		if detail == history.RunEndInterrupted || strings.HasPrefix(detail, history.RunEndInterrupted+":") {
			return true, false, strings.TrimSpace(strings.TrimPrefix(detail, history.RunEndInterrupted+":"))
		}
		return false, false, ""
	}
	return false, recorded(hd), ""
}

// recorded reports whether h is a run's record: the harness writes the
// wall-clock start into the header, and so may another program's recorder
// (docs/history.md); a history written from an incident's account need not.
// Such a record is incomplete without a run-end, and is held to the rules
// of a run (runUnknownReasons).
func recorded(hd history.Header) bool { return hd.Started != "" }

// runUnknownReasons lists why a run, whatever its checks found, tested too
// little for a pass: it was interrupted or cut short, a lock client
// program broke the client protocol, no client was ever
// granted the lock, the nemesis it asked for injected nothing, or no client
// wrote (the last three only for a history lockcheck recorded: a
// hand-written one was not asked to test anything), or the history holds
// no client operation at all. Each is a sentence; the verdict is unknown
// when there is any and no safety check failed.
func runUnknownReasons(hd history.Header, f *facts, r *Result) []string {
	var out []string
	if r.Interrupted {
		s := "The run was interrupted before its time limit"
		if r.InterruptedBy != "" {
			s += " (" + r.InterruptedBy + ")"
		}
		out = append(out, s+", so it tested less than it was asked to.")
	}
	if r.Incomplete {
		out = append(out, "The history ends without a run-end event: its recorder was killed, or could not write, before the run finished; what was recorded was checked.")
	}
	if s := clientViolationReason(r.ClientViolations, r.ClientViolationCount, f.span.Start); s != "" {
		// Holds for a hand-written history too: a recorded break is one.
		out = append(out, s)
	}
	l := &r.Checks.Liveness
	if l.AcquireAttempts == 0 && r.Checks.Linearizability.Operations == 0 {
		// Holds for a hand-written history too: with no client operation
		// there is nothing a pass could vouch for.
		return append(out, "The history holds no acquire, read or write, so nothing was tested.")
	}
	unanswered := recorded(hd) && f.quiet.mostlyUnanswered()
	if unanswered {
		// Before anything else: it explains the rest.
		out = append([]string{unansweredReason(&f.quiet, f.span.Start)}, out...)
	}
	if noFaultLanded(r.FaultLanding) && !anomalyUnderFault(r, hd.Config.Guarded()) {
		// Holds for a hand-written history that records its nemesis's
		// landings too. An anomaly under a fault says the run tested
		// what its faults aim at, whatever their landings say.
		if unanswered && r.FaultLanding.Injected > 0 {
			out = append(out, fmt.Sprintf("No fault landed, which the unanswered acquires explain: a lock that is hardly ever granted gives no fault its moment (the first missed: %s).", r.FaultLanding.Missed))
		} else {
			out = append(out, noFaultLandedReason(r.FaultLanding, askedFaults(hd.Config)))
		}
	}
	if !recorded(hd) {
		// A history written by hand (an incident's account) tells what
		// happened; it was not asked to test anything.
		return out
	}
	if l.Grants == 0 {
		out = append(out, fmt.Sprintf("No client was ever granted the lock (%s), so nothing was tested.", acquireOutcomes(l)))
	} else if !f.anyWrite {
		out = append(out, "No client wrote to the resource, so the lock protected nothing.")
	} else if f.accepted == 0 {
		s := fmt.Sprintf("No write was accepted: the resource refused all %s, so nothing the lock protected was tested", count(f.writes, "write", "writes"))
		if hd.Config.Fenced() {
			s += " (a fenced resource refuses a write with no fence or a stale one: a lock that hands out none needs --fence-source resource)"
		}
		out = append(out, s+".")
	}
	if asked := askedFaults(hd.Config); !r.FaultLanding.Judged() && asked != "" && injected(r.Faults) == 0 {
		// A history from before landing events: judged by what was injected.
		out = append(out, fmt.Sprintf("The nemesis was asked for %s but injected no fault.", asked))
	}
	return out
}

// askedFaults names the faults a seeded nemesis was asked for, or "" when
// it was asked for none. A scenario's timeline ("script") reports the steps
// that never ran itself.
func askedFaults(cfg history.RunConfig) string {
	var asked []string
	for _, f := range cfg.Nemesis {
		if f != "" && f != "none" && f != "script" {
			asked = append(asked, f)
		}
	}
	return strings.Join(asked, ", ")
}

// injected counts the faults the nemesis made; a promotion is the
// service's own doing.
func injected(faults []Fault) int {
	n := 0
	for _, f := range faults {
		if f.Kind != history.NemSwitchMaster {
			n++
		}
	}
	return n
}

// unansweredLead starts the reason of a run whose acquires mostly got no
// answer, which leads the verdict's sentence.
const unansweredLead = "Most acquires got no answer"

// unansweredReason says how many acquires made with no fault in force got
// no answer, and names the most common error, its count and when it first
// came (t0 is the history's start).
func unansweredReason(q *quietAcquires, t0 int64) string {
	e := q.common()
	when := "that never came back"
	if e.first != never {
		when = "first at " + relSeconds(e.first-t0)
	}
	return fmt.Sprintf("%s, so the run tested almost nothing: %d of the %d made while no fault was in force ended in an error or an unknown outcome, most often (%s, %s) %s.",
		unansweredLead, q.unanswered, q.n, count(e.count, "time", "times"), when, strings.TrimSuffix(e.text, "."))
}

// withRunReasons adds the run's unknown reasons to the verdict's sentence:
// they replace "no safety check failed" praise when they made the verdict
// unknown, and follow the failure's story when a safety check failed. A
// run whose acquires mostly got no answer says so before anything else.
func withRunReasons(r *Result) string {
	if len(r.UnknownReasons) == 0 {
		return r.Reason
	}
	reasons := r.UnknownReasons
	var lead string
	if strings.HasPrefix(reasons[0], unansweredLead) {
		lead, reasons = reasons[0], reasons[1:]
	}
	var s string
	switch {
	case len(reasons) == 0:
		s = r.Reason
	case r.Valid == Unknown && r.Reason == "":
		s = "No safety check failed, but the verdict is unknown: " + strings.Join(reasons, " ")
	default:
		s = r.Reason + " " + strings.Join(reasons, " ")
	}
	return strings.TrimSpace(lead + " " + s)
}

// acquireOutcomes says how a run's acquires ended, in words: refused as
// busy, refused by the service, not sent by the client (only when some
// were), unknown.
func acquireOutcomes(l *Liveness) string {
	notSent := ""
	if l.AcquireNotSent > 0 {
		notSent = fmt.Sprintf(", %d not sent by the client (not connected)", l.AcquireNotSent)
	}
	return fmt.Sprintf("%d acquires: %d refused as busy, %d refused by the service%s, %d with an unknown outcome",
		l.AcquireAttempts, l.AcquireFailed, l.AcquireRefused, notSent, l.AcquireUnknown)
}
