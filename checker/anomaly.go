package checker

import (
	"fmt"
	"strings"

	"github.com/lockcheck/lockcheck/history"
)

// firstAnomaly is the time of the earliest piece of evidence of a check that
// failed (each check's AnomalyTimes says what its evidence is). ok is false
// when no check failed. It reads the evidence the checks kept (the first
// maxEvidence items of each), so in a history with more anomalies than that
// on several keys it is the earliest of those kept.
func firstAnomaly(r *Result, fenced bool) (at int64, ok bool) {
	eachAnomaly(r, fenced, func(t int64) {
		if !ok || t < at {
			at, ok = t, true
		}
	})
	return at, ok
}

// anomalyUnderFault says whether some evidence of a failed check lies
// within a fault's interval: then the run did test what its faults aim
// at, whatever their landings say (one that the run's end cut short).
func anomalyUnderFault(r *Result, fenced bool) bool {
	under := false
	eachAnomaly(r, fenced, func(t int64) {
		under = under || len(faultsDuring(r.Faults, t, t)) > 0
	})
	return under
}

// eachAnomaly calls note with the time of each piece of evidence of a check
// that failed.
func eachAnomaly(r *Result, fenced bool, note func(int64)) {
	ctx := JudgeContext{Fenced: fenced, T0: r.Span.Start}
	for _, c := range r.Checks.List() {
		if c.Check.Judge(ctx).Status == StatusFailed {
			c.Check.AnomalyTimes(note)
		}
	}
}

// firstAnomalyMs is firstAnomaly in milliseconds from the start of the
// history, nil when no check failed.
func firstAnomalyMs(r *Result, fenced bool) *float64 {
	at, ok := firstAnomaly(r, fenced)
	if !ok {
		return nil
	}
	ms := float64(max(at-r.Span.Start, 0)) / 1e6
	return &ms
}

// CheckAnomalies is how many anomalies one failed check found.
type CheckAnomalies struct {
	Key   string // the check's key in results.json
	Count int
}

// AnomaliesByCheck counts the anomalies of each check that failed (its
// Anomalies, at least one), in results.json's order. fenced says whether
// the workload's resource checks fences.
func AnomaliesByCheck(r *Result, fenced bool) []CheckAnomalies {
	var out []CheckAnomalies
	for _, nc := range r.Checks.List() {
		if nc.Check.Judge(JudgeContext{Fenced: fenced, T0: r.Span.Start}).Status == StatusFailed {
			out = append(out, CheckAnomalies{Key: nc.Key, Count: max(nc.Check.AnomalyCount(), 1)})
		}
	}
	return out
}

// MaxEvidenceLines caps the evidence lines a check states (EvidenceLines); the
// report's tables and results.json have all of it.
const MaxEvidenceLines = 20

// evidenceLines are the first MaxEvidenceLines of n lines of evidence,
// and a last one saying how many more results.json has.
func evidenceLines(n int, line func(int) string) []string {
	var out []string
	for i := 0; i < n && i < MaxEvidenceLines; i++ {
		out = append(out, line(i))
	}
	if n > MaxEvidenceLines {
		out = append(out, fmt.Sprintf("... and %d more in results.json", n-MaxEvidenceLines))
	}
	return out
}

// RelSec prints a CLOCK_MONOTONIC time as seconds since t0, the start of
// the history's span.
func RelSec(ns, t0 int64) string {
	return fmt.Sprintf("%.3f s", float64(ns-t0)/1e9)
}

// FmtMs prints milliseconds without noise: 612, 1.5, 0.25.
func FmtMs(ms float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", ms), "0"), ".")
}

// FmtFence prints a fence, or "none".
func FmtFence(f *int64) string {
	if f == nil {
		return "none"
	}
	return fmt.Sprint(*f)
}

// OrNone joins a list of faults, or says "none".
func OrNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

// BelievedHeld says who believed they held a lock during a window: "c0 and
// c1 both held", "c0, c1 and c3 believed, at least two at once, they held".
func BelievedHeld(ps []history.Process) string {
	if len(ps) == 2 {
		return fmt.Sprintf("%s and %s both held", ps[0], ps[1])
	}
	return JoinAnd(ProcessNames(ps)) + " believed, at least two at once, they held"
}

// Holder names who got a grant a fence anomaly compares: a client, or an
// earlier segment of a soak (the segment's head, Index -1).
func (g Grant) Holder() string {
	if g.Index < 0 {
		return "an earlier segment"
	}
	return g.Process.String()
}
