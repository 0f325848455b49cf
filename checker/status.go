package checker

import (
	"fmt"
)

// Status is how one check came out. Each check decides its own, once, in
// its Judge method; the verdict, junit.xml, the summary, the report and a
// scenario's expectations all read that decision, so they cannot disagree.
type Status string

// Statuses of a check.
const (
	StatusOK      Status = "ok"
	StatusNotice  Status = "notice"  // passes, but shows something a reader should look at
	StatusFailed  Status = "failed"  // the check found a safety violation
	StatusUnknown Status = "unknown" // the check could not finish; never a pass
	StatusSkipped Status = "skipped" // the check had nothing to check
)

// Judgement is a check's status and, when it is not ok, why, in one
// sentence.
type Judgement struct {
	Status  Status
	Message string
}

// JudgeContext is what a check needs besides its own numbers: whether the
// resource checks fences, and the start of the history, from which times in
// messages are counted in seconds.
type JudgeContext struct {
	Fenced bool
	T0     int64
}

// CheckResult is what every check's result is: it decides its own status,
// counts its anomalies, says when each was and states its evidence. The
// verdict, the online check, a soak's segments, the summary, junit.xml, the
// report and a scenario's expectations iterate Checks.List and read these
// methods, so a check that lacks one does not compile.
type CheckResult interface {
	// Judge decides the check's status, once, with its message.
	Judge(JudgeContext) Judgement
	// AnomalyCount is how many anomalies it found, as the online check's
	// progress line and a soak's segments count a failed check's (one
	// whose failure is one finding says 1).
	AnomalyCount() int
	// AnomalyTimes calls note with the time of each piece of evidence of
	// its failure that it kept (the first maxEvidence of each kind): the
	// verdict's first anomaly and whether one lies under a fault read it.
	// It is called only for a check that failed.
	AnomalyTimes(note func(at int64))
	// EvidenceLines are its key numbers in a few words and its evidence
	// lines (the first MaxEvidenceLines), times counted in seconds from
	// t0; status is its own Judge's.
	EvidenceLines(status Status, t0 int64) (numbers string, lines []string)
	// conclude computes the check's result from what the scan found.
	conclude(c *conclusion)
}

// conclusion is what the checks are computed from: the scan, the keys'
// facts and the faults. settled says it is what the stretches settled so
// far show (the online check, Follower.Anomalies): a check that can judge
// only a whole history (liveness) leaves itself empty, linearizability
// says only whether a settled segment was illegal. f is nil then.
type conclusion struct {
	s       *scanner
	f       *facts
	keys    []*keyFacts
	faults  []Fault
	span    Interval
	settled bool
}

// NamedCheck is one check with its key in results.json and its name as
// people read it.
type NamedCheck struct {
	Key   string
	Title string
	Check CheckResult
}

// List is every check, in results.json's order: the one place that
// enumerates them. A check's line here is what makes it a CheckResult, so
// a check that lacks a method does not compile; TestListIsEveryCheck
// holds it to the fields of Checks.
func (c *Checks) List() []NamedCheck {
	return []NamedCheck{
		{"lease_safety", "lease safety", &c.LeaseSafety},
		{"double_ownership", "double ownership", &c.DoubleOwnership},
		{"resource", "resource", &c.Resource},
		{"fencing", "fencing", &c.Fencing},
		{"linearizability", "linearizability", &c.Linearizability},
		{"liveness", "liveness", &c.Liveness},
	}
}

// concludeAll computes every check from what the scan found.
func (c *Checks) concludeAll(from *conclusion) {
	for _, nc := range c.List() {
		nc.Check.conclude(from)
	}
}

// Keys are the checks' keys in results.json, in its order.
func Keys() []string {
	var keys []string
	for _, c := range (&Checks{}).List() {
		keys = append(keys, c.Key)
	}
	return keys
}

// Plural counts a noun in words: "1 window", "3 windows".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
