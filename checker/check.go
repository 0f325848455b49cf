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

// DefaultClockAllowance is history.ClockAllowance (2ms plus a thousandth
// of the TTL) of a TTL in ms, in nanoseconds.
func DefaultClockAllowance(ttlMs int64) int64 {
	return int64(history.ClockAllowance(time.Duration(ttlMs) * time.Millisecond))
}

// HistoryClockAllowance is the clock allowance a default check of the
// history with header hd takes (DefaultClockAllowance, widened by the
// drift of its wall-clock offset): what the report draws its leases with.
func HistoryClockAllowance(hd history.Header) func(ttlMs int64) int64 {
	return driftAllowance(DefaultClockAllowance, hd.WallOffset)
}

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
	return checkWith(h, func() resourceSource { return sliceSource(resource) }, opts)
}

// CheckLog is Check of a history with its resource log as read (nil: none),
// so that a log whose last line was cut off makes the resource check
// unknown: the writes of its lost part cannot be judged.
func CheckLog(h *history.History, l *history.ResourceLog, opts Options) *Result {
	if l == nil {
		return Check(h, nil, opts)
	}
	return checkWith(h, func() resourceSource { return logSource(l.Entries, l.Truncated) }, opts)
}

// checkWith is Check with the resource log read from a new source each time
// the history is scanned.
func checkWith(h *history.History, source func() resourceSource, opts Options) *Result {
	opts = opts.withDefaults()
	r, _ := checkSettling(func(settle bool) (*Result, bool, error) {
		s := newScanner(h.Header, opts, source())
		if !settle {
			s.settleAt = 0
		}
		for i := range h.Events {
			s.event(&h.Events[i])
		}
		return s.concluded(h.Truncated)
	})
	return r
}

// checkSettling runs a check that settles as it goes (check(true)); a
// history that went back past a settled stretch is checked again without
// settling. check returns the result, whether the history went back, and
// a read error.
func checkSettling(check func(settle bool) (*Result, bool, error)) (*Result, error) {
	r, reordered, err := check(true)
	if err == nil && reordered {
		r, _, err = check(false)
	}
	return r, err
}

// concluded concludes the scan, or says it went back past a settled
// stretch (then the result is nil); truncated says the history's last line
// was cut off.
func (s *scanner) concluded(truncated bool) (*Result, bool, error) {
	r, err := s.conclude(truncated)
	if s.reordered {
		return nil, true, nil
	}
	return r, false, err
}

// conclude settles what the scan still holds and runs the checks on the
// history's facts; truncated says its last line was cut off.
func (s *scanner) conclude(truncated bool) (*Result, error) {
	f := s.finish()
	s.settleAll(f)
	if s.err != nil {
		return nil, s.err
	}
	hd := s.header
	r := &Result{Faults: f.faults, Span: f.span, Truncated: Truncated{History: truncated}}
	r.Checks.concludeAll(&conclusion{s: s, f: f, keys: f.keys, faults: f.faults, span: f.span})
	r.Sessions = s.story.result()
	r.Interrupted, r.Incomplete, r.InterruptedBy = runEnding(hd, f)
	r.FaultLanding = faultLanding(f.nemesis, r.Faults, hd.Config)
	r.ClientViolations, r.ClientViolationCount = clientViolations(f.nemesis)
	fenced := hd.Config.Guarded()
	r.Valid = verdict(hd, f, r, fenced)
	r.Reason = explain(r, fenced)
	r.UnknownReasons = runUnknownReasons(hd, f, r)
	r.Reason = withRunReasons(r)
	r.FirstAnomalyMs = firstAnomalyMs(r, fenced)
	if w := hd.WallOffset; w != nil {
		r.ClockDriftMs = new(ms(w.Drift()))
	}
	return r, nil
}

// driftAllowance is the clock allowance of a history whose times were
// carried from a server's wall clock through an offset that drifted
// (history.WallOffset): each such time may be off by the drift, so every
// lease is taken as certainly live for the drift less. A history without
// offsets keeps base.
func driftAllowance(base func(ttlMs int64) int64, w *history.WallOffset) func(ttlMs int64) int64 {
	if w == nil || w.Drift() == 0 {
		return base
	}
	drift := w.Drift()
	return func(ttlMs int64) int64 { return base(ttlMs) + drift }
}

// verdict is false when a check failed (lease safety, resource, fencing,
// an illegal linearizability result, or a write that landed during double
// ownership without a fence to stop it: each check's Judge decides),
// unknown when a check could not finish (linearizability) or the run
// tested too little for a pass (runUnknownReasons: interrupted, nothing
// granted, no fault landed, ...), and true otherwise.
func verdict(hd history.Header, f *facts, r *Result, fenced bool) Validity {
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
	case unknown, len(runUnknownReasons(hd, f, r)) > 0:
		return Unknown
	}
	return Valid
}
