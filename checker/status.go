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

// Judged is a check that decides its own status.
type Judged interface {
	Judge(JudgeContext) Judgement
}

// NamedCheck is one check with its key in results.json and its name as
// people read it.
type NamedCheck struct {
	Key   string
	Title string
	Check Judged
}

// List is every check, in results.json's order: the one place that
// enumerates them.
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

// Plural counts a noun in words: "1 window", "3 windows".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
