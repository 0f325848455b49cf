package checker

import (
	"fmt"
	"strings"
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

// Judge fails lease safety on any grant made while another lease was
// certainly live.
func (l *LeaseSafety) Judge(JudgeContext) Judgement {
	if l.Valid && l.Violations == 0 {
		return Judgement{Status: StatusOK}
	}
	return Judgement{StatusFailed, fmt.Sprintf("The lock service granted the lock while another client's lease was certainly live and not released (%s).", Plural(l.Violations, "violation"))}
}

// Judge applies the verdict's rule: overlapping beliefs are always
// reported, but they are a failure only when the workload writes without a
// fence and the resource accepted writes inside a window.
//
// Writes the history does not tie to a lock (Applicability unknown) leave
// an unfenced run's double ownership unknown: the check cannot say whether
// they landed inside an overlap.
func (d *DoubleOwnership) Judge(c JudgeContext) Judgement {
	switch {
	case !c.Fenced && d.UnsafeWrites > 0:
		return Judgement{StatusFailed, fmt.Sprintf("Two clients believed they held the lock at the same time and the resource, which checks no fence, accepted %s from them.", Plural(d.UnsafeWrites, "write"))}
	case !c.Fenced && d.State == StateUnknown:
		return Judgement{StatusUnknown, "Double ownership could not be judged: " + d.StateReason}
	case d.Windows == 0:
		return Judgement{Status: StatusOK}
	case c.Fenced:
		return Judgement{StatusNotice, "Two clients believed they held the lock at the same time; the fenced resource is what keeps this safe."}
	}
	return Judgement{StatusNotice, "Two clients believed they held the lock at the same time, but neither wrote inside the overlap."}
}

// Judge fails the resource on a lost update or an accepted stale write,
// and is unknown when writes could not be judged (no resource log and no
// prev on a write).
func (r *ResourceSafety) Judge(JudgeContext) Judgement {
	if r.Valid && r.LostUpdates == 0 && r.StaleWritesAccepted == 0 {
		if r.State == StateUnknown {
			return Judgement{StatusUnknown, "The resource check could not judge every write: " + r.StateReason}
		}
		return Judgement{Status: StatusOK}
	}
	return Judgement{StatusFailed, fmt.Sprintf("The protected resource was corrupted: %s and %s accepted.",
		Plural(r.LostUpdates, "lost update"), Plural(r.StaleWritesAccepted, "stale write"))}
}

// Judge fails fencing on a fence that did not rise, and skips it when no
// grant carried a fence.
func (f *Fencing) Judge(JudgeContext) Judgement {
	if f.Valid && f.Regressions == 0 && f.Duplicates == 0 {
		if !f.Checked {
			return Judgement{StatusSkipped, "No grant carried a fence, so fence order was not checked."}
		}
		return Judgement{Status: StatusOK}
	}
	msg := fmt.Sprintf("Fences did not rise with the order of grants: %s, %s.", Plural(f.Regressions, "regression"), Plural(f.Duplicates, "duplicate"))
	for _, a := range f.Anomalies {
		if a.Cause != "" {
			msg += " This is INCR after failover: the fence counter lives on the master, and a promoted replica that had not seen its last INCRs handed their numbers out again."
			break
		}
	}
	return Judgement{StatusFailed, msg}
}

// Judge fails linearizability on an illegal history; anything but a
// finished search, an empty result included, is unknown, never a pass.
func (l *Linearizability) Judge(JudgeContext) Judgement {
	switch l.Result {
	case Linearizable:
		return Judgement{Status: StatusOK}
	case NotLinearizable:
		return Judgement{StatusFailed, "The lock-protected read-modify-write history is not linearizable."}
	}
	msg := "The linearizability check could not finish, so its result is unknown, not a pass"
	if l.Detail != "" {
		msg += " (" + strings.TrimSuffix(l.Detail, ".") + ")"
	}
	return Judgement{StatusUnknown, msg + "."}
}

// Judge never fails liveness: the verdict is about safety. A lock stuck
// until the end of the run is a notice, with the checker's explanation.
func (l *Liveness) Judge(c JudgeContext) Judgement {
	if !l.StuckUntilEnd {
		return Judgement{Status: StatusOK}
	}
	msg := "The lock was stuck until the end of the run"
	if l.Stall != nil {
		msg += fmt.Sprintf(" from %.3f s", float64(l.Stall.Start-c.T0)/1e9)
	}
	if l.StallReason != "" {
		msg += ": " + l.StallReason
	}
	return Judgement{StatusNotice, strings.TrimSuffix(msg, ".") + "."}
}

// Plural counts a noun in words: "1 window", "3 windows".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
