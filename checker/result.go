package checker

import (
	"encoding/json"
	"fmt"

	"github.com/lockcheck/lockcheck/history"
)

// Validity is a verdict: true, false, or unknown when a check could not
// finish. Unknown is never a pass.
type Validity int

// Validity values.
const (
	Unknown Validity = iota
	Valid
	Invalid
)

// MarshalJSON writes true, false or "unknown", as results.json promises.
func (v Validity) MarshalJSON() ([]byte, error) {
	switch v {
	case Valid:
		return []byte("true"), nil
	case Invalid:
		return []byte("false"), nil
	}
	return []byte(`"unknown"`), nil
}

// UnmarshalJSON reads true, false or "unknown".
func (v *Validity) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true":
		*v = Valid
	case "false":
		*v = Invalid
	case `"unknown"`:
		*v = Unknown
	default:
		return fmt.Errorf("validity must be true, false or \"unknown\", got %s", b)
	}
	return nil
}

// String is the verdict as a word: true, false or unknown (no JSON quotes:
// the summary prints it, the index filters on it, a scenario compares it).
func (v Validity) String() string {
	switch v {
	case Valid:
		return "true"
	case Invalid:
		return "false"
	}
	return "unknown"
}

// Result is everything the checker concludes about one history. Its JSON
// form is the "checks" object of results.json plus the verdict; keys are
// added over time and never renamed.
type Result struct {
	Valid  Validity `json:"valid"`
	Reason string   `json:"reason"` // the verdict in one plain sentence, built from the evidence
	Checks Checks   `json:"checks"`
	// Faults are the nemesis faults of the run as intervals, for the report.
	Faults []Fault `json:"faults"`
	// Span bounds the history on CLOCK_MONOTONIC (first and last event).
	Span Interval `json:"span"`
	// Truncated says which input was cut off mid-line; the complete prefix
	// was checked.
	Truncated Truncated `json:"truncated"`
	// Interrupted is set when the run stopped before its time limit
	// (Ctrl-C, SIGTERM, a recording that failed); InterruptedBy says why
	// when the harness knew more than "interrupted".
	Interrupted   bool   `json:"interrupted"`
	InterruptedBy string `json:"interrupted_by,omitempty"`
	// Incomplete is set when a recorded history has no run-end event: the
	// run was killed or could not record its end.
	Incomplete bool `json:"incomplete"`
	// UnknownReasons are why the run tested too little for a pass, one
	// sentence each; any of them makes a verdict that is not false unknown.
	UnknownReasons []string `json:"unknown_reasons,omitempty"`
	// FaultLanding counts the nemesis steps and those whose fault landed.
	FaultLanding FaultLanding `json:"fault_landing"`
	// ClockDriftMs is how far the history's wall-clock offset drifted
	// during the run (the header's wall_offset_ns), in ms; every lease's
	// clock allowance was widened by it. Nil when the header has none.
	ClockDriftMs *float64 `json:"clock_drift_ms,omitempty"`
	// Sessions is the evidence of locks bound to server sessions that a
	// release missed or that a session still held at the end (a pooler's
	// signature); absent when there is none.
	Sessions *ServerSessions `json:"sessions,omitempty"`
	// ClientViolations are the rules of the client protocol a lock client
	// program broke (client-violation events); any makes a verdict that is
	// not false unknown. Absent when there is none.
	ClientViolations []ClientViolation `json:"client_violations,omitempty"`
	// ClientViolationCount counts them all; ClientViolations keeps the
	// first 1000.
	ClientViolationCount int `json:"client_violation_count,omitempty"`
	// FirstAnomalyMs is the time from the start of the history (its
	// first event) to the earliest evidence of a failed check, in ms; nil
	// when no check failed.
	FirstAnomalyMs *float64 `json:"first_anomaly_ms"`
}

// Truncated says, per input file, whether its last line was cut off
// mid-write (a run that was killed) and dropped.
type Truncated struct {
	History  bool `json:"history"`
	Resource bool `json:"resource"`
}

// Checks holds one entry per check, in results.json's order: adding a
// check is its file (its result type, implementing CheckResult), its line
// here and its line in List.
type Checks struct {
	LeaseSafety     LeaseSafety     `json:"lease_safety"`
	DoubleOwnership DoubleOwnership `json:"double_ownership"`
	Resource        ResourceSafety  `json:"resource"`
	Fencing         Fencing         `json:"fencing"`
	Linearizability Linearizability `json:"linearizability"`
	Liveness        Liveness        `json:"liveness"`
}

// Applicability says whether a check could be evaluated on this history.
// Both fields are empty for a check that was; State is "skipped" when the
// check does not apply (no fence was handed out) and "unknown" when it
// should apply but the history lacks what it needs, with the reason in one
// sentence. An unknown check is never a pass.
type Applicability struct {
	State       string `json:"status,omitempty"`
	StateReason string `json:"status_reason,omitempty"`
}

// States of a check that could not be evaluated.
const (
	StateSkipped = "skipped"
	StateUnknown = "unknown"
)

// Interval is a span of CLOCK_MONOTONIC nanoseconds.
type Interval struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// Fault is a nemesis fault as an interval: from its start event (pause,
// kill, ...) to its healing event (resume, start), or a point when it has
// none.
type Fault struct {
	Kind      string `json:"kind"`   // pause, kill, ...
	Target    string `json:"target"` // c3, redis-0, ...
	Start     int64  `json:"start"`
	End       int64  `json:"end"`
	Failpoint string `json:"failpoint,omitempty"`
	Index     int64  `json:"index"` // history index of the start event
	// Detail is what the fault did, where that matters to the story (the
	// offset of a clock jump).
	Detail string `json:"detail,omitempty"`
	// Step is the nemesis step that injected it; nil when no step did (a
	// promotion the service made). A history may number its steps from 0.
	Step *int `json:"step,omitempty"`
	// Landed says whether its step's fault met the precondition it exists
	// to create, and Why says what happened (from the step's landing
	// event).
	Landed bool   `json:"landed"`
	Why    string `json:"why,omitempty"`
}

// Grant is one successful acquire, with the span in which its lease was
// certainly live.
type Grant struct {
	Key     string          `json:"key"`
	Process history.Process `json:"process"`
	Invoke  int64           `json:"invoke"` // acquire invoke time
	OK      int64           `json:"ok"`     // acquire ok time
	Fence   *int64          `json:"fence,omitempty"`
	TTLms   int64           `json:"ttl_ms"`
	// Nodes granted it, for a lock won on several nodes (Redlock).
	Nodes []string `json:"nodes,omitempty"`
	// Session is the server session a lock without a TTL is bound to
	// (PostgreSQL: node/backend pid); its lease ends with the session.
	Session string `json:"session,omitempty"`
	// Via names the node (a pooler) the session's statements went
	// through: its death ends the session too.
	Via string `json:"via,omitempty"`
	// CertainEnd is the earliest moment the lease can have ended: the
	// earliest possible expiry (invoke + TTL, pushed out by successful
	// extends, less the clock allowance) or the invoke of a release that
	// may have deleted the key (ok and not accepted false, or unknown),
	// whichever is first. A grant continued by its holder's re-entrant
	// grant lasts as long as that one (docs/history.md).
	CertainEnd int64 `json:"certain_end"`
	// BeliefEnd ends the client's belief interval [OK, BeliefEnd]: release
	// invoke, its death, a retiring info, its re-entrant grant's OK, or the
	// end of the history.
	BeliefEnd int64 `json:"belief_end"`
	Index     int64 `json:"index"` // history index of the acquire ok event
}

// MarshalIndent is a helper for tests and writers.
func (r *Result) MarshalIndent() ([]byte, error) { return json.MarshalIndent(r, "", "  ") }
