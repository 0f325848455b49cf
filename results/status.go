package results

import (
	"fmt"
	"strings"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// word is a check's status as the summary and the report print it.
func word(s checker.Status) string {
	switch s {
	case checker.StatusFailed:
		return "FAILED"
	case checker.StatusUnknown:
		return "UNKNOWN"
	}
	return string(s)
}

// class is a check's status as a CSS class of the report.
func class(s checker.Status) string {
	switch s {
	case checker.StatusOK:
		return "pass"
	case checker.StatusFailed:
		return "fail"
	}
	return string(s)
}

// Values of result.go's documented string fields that change how a check
// is drawn.
const (
	staleWriteRefused = "stale-write-refused" // ResourceAnomaly.Kind: fencing did its job
	sourceHistory     = "history"             // ResourceSafety.Source without a resource log
)

// checkStatus is one check's outcome in words: the status and message the
// check decided itself (checker's Judge), with its numbers and evidence.
// junit.xml, the summary and the report all derive from checkStatuses.
type checkStatus struct {
	Key     string // the check's key in results.json
	Title   string // the check as people read it
	Outcome checker.Status
	Numbers string // its key numbers, for the summary and junit system-out
	Message string // one sentence, set when the outcome is not ok
	Details []string
}

// maxDetails caps the evidence lines of one junit failure; the report and
// results.json have all of them.
const maxDetails = 20

// checkStatuses describes every check of res, in results.json's order. t0
// is the start of the history's span; evidence times are printed relative
// to it.
func checkStatuses(cfg history.RunConfig, res *checker.Result, t0 int64) []checkStatus {
	var out []checkStatus
	for _, c := range res.Checks.List() {
		j := c.Check.Judge(checker.JudgeContext{Fenced: cfg.Guarded(), T0: t0})
		st := checkStatus{Key: c.Key, Title: c.Title, Outcome: j.Status, Message: j.Message}
		st.Numbers, st.Details = evidence(c.Check, j.Status, t0)
		out = append(out, st)
	}
	return out
}

// evidence is a check's key numbers and its evidence lines.
func evidence(check checker.Judged, status checker.Status, t0 int64) (string, []string) {
	switch c := check.(type) {
	case *checker.LeaseSafety:
		return leaseEvidence(c, t0)
	case *checker.DoubleOwnership:
		return doubleOwnershipEvidence(c, t0)
	case *checker.ResourceSafety:
		return resourceEvidence(c, status, t0)
	case *checker.Fencing:
		return fencingEvidence(c, t0)
	case *checker.Linearizability:
		return linearizabilityEvidence(c, t0)
	case *checker.Liveness:
		return livenessEvidence(c, t0)
	}
	return "", nil
}

func leaseEvidence(l *checker.LeaseSafety, t0 int64) (string, []string) {
	return plural(l.Violations, "violation"), capLines(len(l.Evidence), func(i int) string {
		v := l.Evidence[i]
		return fmt.Sprintf("key %q: %s was granted at %s while %s's lease (granted at %s) was certainly live until %s; faults: %s",
			v.Key, v.Later.Process, relSec(v.Later.OK, t0), v.Earlier.Process, relSec(v.Earlier.OK, t0),
			relSec(v.Earlier.CertainEnd, t0), orNone(v.Faults))
	})
}

func doubleOwnershipEvidence(d *checker.DoubleOwnership, t0 int64) (string, []string) {
	if d.Windows == 0 {
		return "0 windows", nil
	}
	numbers := fmt.Sprintf("%s, %s ms total, max %s ms, %s", plural(d.Windows, "window"),
		fmtMs(d.TotalMs), fmtMs(d.MaxMs), plural(d.UnsafeWrites, "unsafe write"))
	return numbers, capLines(len(d.List), func(i int) string {
		w := d.List[i]
		return fmt.Sprintf("key %q: %s the lock from %s for %s ms, %s accepted; faults: %s",
			w.Key, believedHeld(w.Processes), relSec(w.Start, t0), fmtMs(w.Ms),
			plural(w.Unsafe, "write"), orNone(w.Faults))
	})
}

func resourceEvidence(r *checker.ResourceSafety, status checker.Status, t0 int64) (string, []string) {
	numbers := fmt.Sprintf("%s, %s accepted, %s refused", plural(r.LostUpdates, "lost update"),
		plural(r.StaleWritesAccepted, "stale write"), plural(r.StaleWritesRefused, "stale write"))
	if r.Source == sourceHistory {
		numbers += ", judged from the history (no resource log)"
	}
	if status != checker.StatusFailed {
		return numbers, nil
	}
	var bad []checker.ResourceAnomaly
	for _, a := range r.Anomalies {
		if a.Kind != staleWriteRefused {
			bad = append(bad, a)
		}
	}
	return numbers, capLines(len(bad), func(i int) string {
		a := bad[i]
		return fmt.Sprintf("%s on key %q at %s by %s: read %d, resource held %d, wrote %d, fence %s (highest seen %s)",
			a.Kind, a.Key, relSec(a.Time, t0), a.Process, a.Read, a.Prev, a.Value, fmtFence(a.Fence), fmtFence(a.Highest))
	})
}

func fencingEvidence(f *checker.Fencing, t0 int64) (string, []string) {
	if f.Valid && f.Regressions == 0 && f.Duplicates == 0 && !f.Checked {
		return "no grant carried a fence", nil
	}
	numbers := fmt.Sprintf("%s, %s", plural(f.Regressions, "regression"), plural(f.Duplicates, "duplicate"))
	return numbers, capLines(len(f.Anomalies), func(i int) string {
		a := f.Anomalies[i]
		line := fmt.Sprintf("%s: %s was granted fence %s at %s after %s got fence %s at %s",
			a.Kind, a.Later.Process, fmtFence(a.Later.Fence), relSec(a.Later.OK, t0),
			fenceHolder(a.Earlier), fmtFence(a.Earlier.Fence), relSec(a.Earlier.OK, t0))
		if a.Cause != "" {
			line += " (" + a.Cause + ")"
		}
		return line
	})
}

func linearizabilityEvidence(l *checker.Linearizability, t0 int64) (string, []string) {
	var details []string
	if l.Window != nil {
		details = []string{fmt.Sprintf("window %s to %s", relSec(l.Window.Start, t0), relSec(l.Window.End, t0))}
	}
	if l.Detail != "" {
		details = append(details, l.Detail)
	}
	return fmt.Sprintf("%s in %s", plural(l.Operations, "operation"), plural(l.Segments, "segment")), details
}

func livenessEvidence(l *checker.Liveness, t0 int64) (string, []string) {
	numbers := fmt.Sprintf("%s (%.1f/s), longest stall %s ms, acquire p50 %s ms, p99 %s ms",
		plural(l.Grants, "grant"), l.GrantsPerSec, fmtMs(l.LongestStallMs), fmtMs(l.AcquireP50Ms), fmtMs(l.AcquireP99Ms))
	if l.AcquireRefused > 0 {
		// A mitigation at work (min-replicas-to-write) shows as refusals.
		numbers += fmt.Sprintf(", %s refused by the service", plural(l.AcquireRefused, "acquire"))
	}
	if l.Orphaned > 0 {
		numbers += fmt.Sprintf(", orphaned %s", plural(l.Orphaned, "time"))
		if l.StuckUntilEnd {
			numbers += " (until the end of the run)"
		}
	}
	details := capLines(len(l.Orphans), func(i int) string {
		o := l.Orphans[i]
		until := "to " + relSec(o.To, t0)
		if o.UntilEnd {
			until = "to the end of the run"
		}
		return fmt.Sprintf("key %q orphaned from %s %s: %s refused while nobody held it, over longer than the %s ms bound; %s",
			o.Key, relSec(o.From, t0), until, plural(o.Refused, "acquire"), fmtMs(o.BoundMs), o.Reason)
	})
	if l.Stall != nil {
		details = append(details, fmt.Sprintf("longest stall from %s to %s", relSec(l.Stall.Start, t0), relSec(l.Stall.End, t0)))
	}
	if l.StallReason != "" {
		details = append(details, l.StallReason)
	}
	return numbers, details
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

// plural is checker.Plural, under the short name the pages use throughout.
func plural(n int, noun string) string { return checker.Plural(n, noun) }
