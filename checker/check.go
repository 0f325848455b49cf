// Package checker checks a lockcheck history: lease safety, double
// ownership, resource safety, fencing, linearizability of the lock-protected
// read-modify-write, and liveness. It reads only the history and the
// resource log, never the harness, so any stored or hand-written history can
// be checked again.
package checker

import (
	"time"

	"github.com/lockcheck/lockcheck/history"
)

// Options tune a check.
type Options struct {
	// LinearizabilityTimeout bounds the porcupine check of the whole
	// history; 0 means 10s. Running out of time makes the result unknown,
	// never ok.
	LinearizabilityTimeout time.Duration
	// ClockAllowance returns, in nanoseconds, how much earlier than
	// invoke + TTL a lease of ttlMs may already have expired. Redis keeps
	// expiry in whole milliseconds and wall clocks are slewed, and only
	// certain violations are reported. nil means 2ms + TTL/1000.
	ClockAllowance func(ttlMs int64) int64
}

// DefaultLinearizabilityTimeout is used when Options leave it zero.
const DefaultLinearizabilityTimeout = 10 * time.Second

// DefaultClockAllowance is 2ms plus a thousandth of the TTL, in nanoseconds.
func DefaultClockAllowance(ttlMs int64) int64 { return 2e6 + ttlMs*1e3 }

func (o Options) withDefaults() Options {
	if o.LinearizabilityTimeout <= 0 {
		o.LinearizabilityTimeout = DefaultLinearizabilityTimeout
	}
	if o.ClockAllowance == nil {
		o.ClockAllowance = DefaultClockAllowance
	}
	return o
}

// Check checks a history. resource is the resource's serial log; nil means
// there is none (a hand-written history), and the resource check then
// judges the writes as the clients saw them.
func Check(h *history.History, resource []history.ResourceEntry, opts Options) *Result {
	opts = opts.withDefaults()
	f := scan(h, opts.ClockAllowance)
	outcomes := newOutcomes(resource)
	source, unjudged := SourceResourceLog, 0
	if resource == nil {
		resource, unjudged = entriesFromHistory(f.keys)
		source = SourceHistory
	}
	r := &Result{Faults: f.faults, Span: f.span, Truncated: Truncated{History: h.Truncated}}
	r.Checks = Checks{
		LeaseSafety:     checkLeaseSafety(f.keys, f.faults),
		DoubleOwnership: checkDoubleOwnership(f.keys, f.faults, outcomes),
		Resource:        checkResource(resource, source),
		Fencing:         checkFencing(f.keys, f.faults),
		Linearizability: newLinearizabilityCheck(f, outcomes, opts.LinearizabilityTimeout).result(),
		Liveness:        checkLiveness(f),
	}
	r.Checks.Resource.withUnjudged(unjudged)
	r.Interrupted, r.Incomplete, r.InterruptedBy = runEnding(h)
	r.FaultLanding = faultLanding(f.nemesis, r.Faults, h.Header.Config)
	fenced := h.Header.Config.Guarded()
	r.Valid = verdict(h, r, fenced)
	r.Reason = explain(r, fenced)
	r.UnknownReasons = runUnknownReasons(h, r)
	r.Reason = withRunReasons(r)
	return r
}

// verdict is false when a check failed (lease safety, resource, fencing,
// an illegal linearizability result, or a write that landed during double
// ownership without a fence to stop it: each check's Judge decides),
// unknown when a check could not finish (linearizability) or the run
// tested too little for a pass (runUnknownReasons: interrupted, nothing
// granted, no fault landed, ...), and true otherwise.
func verdict(h *history.History, r *Result, fenced bool) Validity {
	failed, unknown := false, false
	for _, c := range r.Checks.List() {
		switch c.Check.Judge(JudgeContext{Fenced: fenced, T0: r.Span.Start}).Status {
		case StatusFailed:
			failed = true
		case StatusUnknown:
			unknown = true
		}
	}
	switch {
	case failed:
		return Invalid
	case unknown, len(runUnknownReasons(h, r)) > 0:
		return Unknown
	}
	return Valid
}
