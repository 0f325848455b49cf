package results

import (
	"fmt"
	"strings"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// outcome is how one check came out. junit.xml, the summary and the report
// all derive from checkStatuses, so they can never disagree with each other.
type outcome int

const (
	pass    outcome = iota
	notice          // passes, but shows something a reader should look at
	fail            // the check found a safety violation
	unknown         // the check could not finish; never a pass
	skipped         // the check had nothing to check
)

// word is the outcome as the summary and the report print it.
func (o outcome) word() string {
	return [...]string{"ok", "notice", "FAILED", "UNKNOWN", "skipped"}[o]
}

// class is the outcome as a CSS class of the report.
func (o outcome) class() string {
	return [...]string{"pass", "notice", "fail", "unknown", "skipped"}[o]
}

// Values of result.go's documented string fields that change how a check
// is judged or drawn.
const (
	staleWriteRefused = "stale-write-refused" // ResourceAnomaly.Kind: fencing did its job
	sourceHistory     = "history"             // ResourceSafety.Source without a resource log
)

// checkStatus is one check's outcome in words.
type checkStatus struct {
	Key     string // the check's key in results.json
	Title   string // the check as people read it
	Outcome outcome
	Numbers string // its key numbers, for the summary and junit system-out
	Message string // one sentence, set when the outcome is not pass
	Details []string
}

// maxDetails caps the evidence lines of one junit failure; the report and
// results.json have all of them.
const maxDetails = 20

// checkStatuses judges every check of res, in results.json's order. t0 is the
// start of the history's span; evidence times are printed relative to it.
func checkStatuses(cfg history.RunConfig, res *checker.Result, t0 int64) []checkStatus {
	c := &res.Checks
	return []checkStatus{
		leaseStatus(&c.LeaseSafety, t0),
		withApplicability(doubleOwnershipStatus(cfg, &c.DoubleOwnership, t0), c.DoubleOwnership.Applicability),
		withApplicability(resourceStatus(&c.Resource, t0), c.Resource.Applicability),
		fencingStatus(&c.Fencing, t0),
		linearizabilityStatus(&c.Linearizability, t0),
		livenessStatus(&c.Liveness, t0),
	}
}

// withApplicability makes a check that found nothing wrong but could not be
// evaluated (checker.Applicability) unknown, with the checker's reason: an
// unknown check is never a pass.
func withApplicability(s checkStatus, a checker.Applicability) checkStatus {
	if a.State == checker.StateUnknown && (s.Outcome == pass || s.Outcome == notice) {
		s.Outcome, s.Message = unknown, "Unknown: "+a.StateReason+"."
	}
	return s
}

func leaseStatus(l *checker.LeaseSafety, t0 int64) checkStatus {
	s := checkStatus{Key: "lease_safety", Title: "lease safety", Numbers: plural(l.Violations, "violation")}
	if l.Valid && l.Violations == 0 {
		return s
	}
	s.Outcome = fail
	s.Message = fmt.Sprintf("The lock service granted the lock while another client's lease was certainly live and not released (%s).", s.Numbers)
	s.Details = capLines(len(l.Evidence), func(i int) string {
		v := l.Evidence[i]
		return fmt.Sprintf("key %q: %s was granted at %s while %s's lease (granted at %s) was certainly live until %s; faults: %s",
			v.Key, v.Later.Process, relSec(v.Later.OK, t0), v.Earlier.Process, relSec(v.Earlier.OK, t0),
			relSec(v.Earlier.CertainEnd, t0), orNone(v.Faults))
	})
	return s
}

// doubleOwnershipStatus applies the verdict's rule: overlapping beliefs are
// always reported, but they are a failure only when the workload writes
// without a fence and the resource accepted writes inside a window.
func doubleOwnershipStatus(cfg history.RunConfig, d *checker.DoubleOwnership, t0 int64) checkStatus {
	s := checkStatus{Key: "double_ownership", Title: "double ownership"}
	s.Numbers = fmt.Sprintf("%s, %s ms total, max %s ms, %s", plural(d.Windows, "window"),
		fmtMs(d.TotalMs), fmtMs(d.MaxMs), plural(d.UnsafeWrites, "unsafe write"))
	if d.Windows == 0 {
		s.Numbers = "0 windows"
		return s
	}
	s.Details = capLines(len(d.List), func(i int) string {
		w := d.List[i]
		return fmt.Sprintf("key %q: %s the lock from %s for %s ms, %s accepted; faults: %s",
			w.Key, believedHeld(w.Processes), relSec(w.Start, t0), fmtMs(w.Ms),
			plural(w.Unsafe, "write"), orNone(w.Faults))
	})
	if !cfg.Guarded() && d.UnsafeWrites > 0 {
		s.Outcome = fail
		s.Message = fmt.Sprintf("Two clients believed they held the lock at the same time and the resource, which checks no fence, accepted %s from them.", plural(d.UnsafeWrites, "write"))
		return s
	}
	s.Outcome = notice
	if cfg.Guarded() {
		s.Message = "Two clients believed they held the lock at the same time; the fenced resource (or the lock's own transaction) is what keeps this safe."
	} else {
		s.Message = "Two clients believed they held the lock at the same time, but neither wrote inside the overlap."
	}
	return s
}

func resourceStatus(r *checker.ResourceSafety, t0 int64) checkStatus {
	s := checkStatus{Key: "resource", Title: "resource"}
	s.Numbers = fmt.Sprintf("%s, %s accepted, %s refused", plural(r.LostUpdates, "lost update"),
		plural(r.StaleWritesAccepted, "stale write"), plural(r.StaleWritesRefused, "stale write"))
	if r.Source == sourceHistory {
		s.Numbers += ", judged from the history (no resource log)"
	}
	if r.Valid && r.LostUpdates == 0 && r.StaleWritesAccepted == 0 {
		return s
	}
	s.Outcome = fail
	s.Message = fmt.Sprintf("The protected resource was corrupted: %s and %s accepted.",
		plural(r.LostUpdates, "lost update"), plural(r.StaleWritesAccepted, "stale write"))
	var bad []checker.ResourceAnomaly
	for _, a := range r.Anomalies {
		if a.Kind != staleWriteRefused {
			bad = append(bad, a)
		}
	}
	s.Details = capLines(len(bad), func(i int) string {
		a := bad[i]
		return fmt.Sprintf("%s on key %q at %s by %s: read %d, resource held %d, wrote %d, fence %s (highest seen %s)",
			a.Kind, a.Key, relSec(a.Time, t0), a.Process, a.Read, a.Prev, a.Value, fmtFence(a.Fence), fmtFence(a.Highest))
	})
	return s
}

func fencingStatus(f *checker.Fencing, t0 int64) checkStatus {
	s := checkStatus{Key: "fencing", Title: "fencing"}
	s.Numbers = fmt.Sprintf("%s, %s", plural(f.Regressions, "regression"), plural(f.Duplicates, "duplicate"))
	if f.Valid && f.Regressions == 0 && f.Duplicates == 0 {
		if !f.Checked {
			s.Outcome = skipped
			s.Message = "No grant carried a fence, so fence order was not checked."
			s.Numbers = "no grant carried a fence"
		}
		return s
	}
	s.Outcome = fail
	s.Message = fmt.Sprintf("Fences did not rise with the order of grants: %s.", s.Numbers)
	for _, a := range f.Anomalies {
		if a.Cause != "" {
			s.Message += " This is INCR after failover: the fence counter lives on the master, and a promoted replica that had not seen its last INCRs handed their numbers out again."
			break
		}
	}
	s.Details = capLines(len(f.Anomalies), func(i int) string {
		a := f.Anomalies[i]
		line := fmt.Sprintf("%s: %s was granted fence %s at %s after %s got fence %s at %s",
			a.Kind, a.Later.Process, fmtFence(a.Later.Fence), relSec(a.Later.OK, t0),
			a.Earlier.Process, fmtFence(a.Earlier.Fence), relSec(a.Earlier.OK, t0))
		if a.Cause != "" {
			line += " (" + a.Cause + ")"
		}
		return line
	})
	return s
}

func linearizabilityStatus(l *checker.Linearizability, t0 int64) checkStatus {
	s := checkStatus{Key: "linearizability", Title: "linearizability"}
	s.Numbers = fmt.Sprintf("%s in %s", plural(l.Operations, "operation"), plural(l.Segments, "segment"))
	if l.Window != nil {
		s.Details = []string{fmt.Sprintf("window %s to %s", relSec(l.Window.Start, t0), relSec(l.Window.End, t0))}
	}
	if l.Detail != "" {
		s.Details = append(s.Details, l.Detail)
	}
	switch l.Result {
	case "ok":
	case "illegal":
		s.Outcome = fail
		s.Message = "The lock-protected read-modify-write history is not linearizable."
	default:
		// Anything but a finished search, including an empty result, is
		// unknown: a check that did not finish is never a pass.
		s.Outcome = unknown
		s.Message = "The linearizability check could not finish, so its result is unknown, not a pass."
	}
	return s
}

// livenessStatus never fails: the verdict is about safety. A lock stuck until
// the end of the run is a notice, with the checker's explanation.
func livenessStatus(l *checker.Liveness, t0 int64) checkStatus {
	s := checkStatus{Key: "liveness", Title: "liveness"}
	s.Numbers = fmt.Sprintf("%s (%.1f/s), longest stall %s ms, acquire p50 %s ms, p99 %s ms",
		plural(l.Grants, "grant"), l.GrantsPerSec, fmtMs(l.LongestStallMs), fmtMs(l.AcquireP50Ms), fmtMs(l.AcquireP99Ms))
	if l.AcquireRefused > 0 {
		// A mitigation at work (min-replicas-to-write) shows as refusals.
		s.Numbers += fmt.Sprintf(", %s refused by the service", plural(l.AcquireRefused, "acquire"))
	}
	if l.Stall != nil {
		s.Details = []string{fmt.Sprintf("longest stall from %s to %s", relSec(l.Stall.Start, t0), relSec(l.Stall.End, t0))}
	}
	if l.StallReason != "" {
		s.Details = append(s.Details, l.StallReason)
	}
	if l.StuckUntilEnd {
		s.Outcome = notice
		s.Numbers += ", stuck until the end of the run"
		s.Message = "The lock was stuck until the end of the run"
		if l.Stall != nil {
			s.Message += " from " + relSec(l.Stall.Start, t0)
		}
		if l.StallReason != "" {
			s.Message += ": " + l.StallReason
		}
		s.Message = strings.TrimSuffix(s.Message, ".") + "."
	}
	return s
}

// spanOf is the time the report and evidence are measured against: the
// checker's span, or the events' own bounds when the result carries none.
func spanOf(h *history.History, res *checker.Result) checker.Interval {
	if res.Span.End > res.Span.Start {
		return res.Span
	}
	span := checker.Interval{Start: h.Header.StartTime, End: h.Header.StartTime}
	for i, e := range h.Events {
		if i == 0 || e.Time < span.Start {
			span.Start = e.Time
		}
		if e.Time > span.End {
			span.End = e.Time
		}
	}
	if span.End <= span.Start {
		span.End = span.Start + 1 // a single instant still needs a width to draw
	}
	return span
}

func capLines(n int, line func(int) string) []string {
	var out []string
	for i := 0; i < n && i < maxDetails; i++ {
		out = append(out, line(i))
	}
	if n > maxDetails {
		out = append(out, fmt.Sprintf("... and %d more in %s", n-maxDetails, ResultsFile))
	}
	return out
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// relSec prints a CLOCK_MONOTONIC time as seconds since the span start.
func relSec(ns, t0 int64) string {
	return fmt.Sprintf("%.3f s", float64(ns-t0)/1e9)
}

// fmtMs prints milliseconds without noise: 612, 1.5, 0.25.
func fmtMs(ms float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", ms), "0"), ".")
}

func fmtFence(f *int64) string {
	if f == nil {
		return "none"
	}
	return fmt.Sprint(*f)
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

// believedHeld says who believed they held a lock during a window: "c0 and
// c1 both held", "c0, c1 and c3 believed, at least two at once, they held".
func believedHeld(ps []history.Process) string {
	if len(ps) == 2 {
		return fmt.Sprintf("%s and %s both held", ps[0], ps[1])
	}
	return checker.JoinAnd(checker.ProcessNames(ps)) + " believed, at least two at once, they held"
}
