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
}

// Truncated says, per input file, whether its last line was cut off
// mid-write (a run that was killed) and dropped.
type Truncated struct {
	History  bool `json:"history"`
	Resource bool `json:"resource"`
}

// Checks holds one entry per check.
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
	// Step is the nemesis step that injected it (0: not injected by a step,
	// such as a promotion the service made).
	Step int `json:"step,omitempty"`
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

// LeaseSafety: did the service grant a lock while another client's lease was
// certainly live and not released?
type LeaseSafety struct {
	Valid      bool             `json:"valid"`
	Violations int              `json:"violations"`
	Evidence   []LeaseViolation `json:"evidence,omitempty"`
	Applicability
}

// LeaseViolation is a grant to Later while Earlier's lease was certainly live.
type LeaseViolation struct {
	Key     string   `json:"key"`
	Earlier Grant    `json:"earlier"`
	Later   Grant    `json:"later"`
	Faults  []string `json:"faults,omitempty"` // faults in force or shortly before, as "pause c3"
}

// DoubleOwnership: windows in which several processes believed they held
// the same key, merged per episode.
type DoubleOwnership struct {
	Windows      int      `json:"windows"`
	TotalMs      float64  `json:"total_ms"`
	MaxMs        float64  `json:"max_ms"`
	UnsafeWrites int      `json:"unsafe_writes"` // accepted writes by a window's processes inside it
	List         []Window `json:"list,omitempty"`
	// UntiedWrites are writes on a key that no acquire names: the model
	// ties a read or write to the lock of its key, so nobody held a lock
	// over them and they cannot be judged (the check is then unknown).
	UntiedWrites int `json:"untied_writes,omitempty"`
	Applicability
}

// Window is a maximal span in which at least two processes believed they
// held Key, merged while the key was never free: from the first moment two
// believed to the last. A paused holder overlapped by grant after grant is
// one window.
type Window struct {
	Key       string            `json:"key"`
	Start     int64             `json:"start"`
	End       int64             `json:"end"`
	Ms        float64           `json:"ms"`
	Processes []history.Process `json:"processes"` // every process that believed during the window, sorted
	Faults    []string          `json:"faults,omitempty"`
	Writes    []int64           `json:"writes,omitempty"` // history indices of writes invoked inside the window by its processes
	Unsafe    int               `json:"unsafe"`           // how many of those the resource accepted
}

// ResourceSafety: was data corrupted, judged from the resource's serial log.
type ResourceSafety struct {
	Valid               bool              `json:"valid"`
	LostUpdates         int               `json:"lost_updates"`
	StaleWritesAccepted int               `json:"stale_writes_accepted"`
	StaleWritesRefused  int               `json:"stale_writes_refused"`
	Source              string            `json:"source"` // "resource-log" or "history"
	Anomalies           []ResourceAnomaly `json:"anomalies,omitempty"`
	// Unjudged are accepted writes that a lost update cannot be judged on:
	// with no resource log, a write ok that carries no prev, or a write
	// with no read before it and no read field (the check is then unknown).
	Unjudged int `json:"unjudged,omitempty"`
	Applicability
}

// ResourceAnomaly is one lost update or stale write.
type ResourceAnomaly struct {
	Kind    string          `json:"kind"` // lost-update, stale-write-accepted, stale-write-refused
	Key     string          `json:"key"`
	Time    int64           `json:"time"`
	Process history.Process `json:"process"`
	Fence   *int64          `json:"fence,omitempty"`
	Highest *int64          `json:"highest,omitempty"` // highest fence seen before, for stale writes
	Read    int64           `json:"read"`
	Prev    int64           `json:"prev"`
	Value   int64           `json:"value"`
	Req     string          `json:"req,omitempty"`
	Reason  string          `json:"reason,omitempty"` // why the resource refused the write
}

// Fencing: fences must rise with the real-time order of grants.
type Fencing struct {
	Valid       bool           `json:"valid"`
	Regressions int            `json:"regressions"`
	Duplicates  int            `json:"duplicates"`
	Checked     bool           `json:"checked"` // false when no grant carried a fence
	Anomalies   []FenceAnomaly `json:"anomalies,omitempty"`
	Applicability
}

// FenceAnomaly is a grant whose fence did not rise above an earlier grant's.
type FenceAnomaly struct {
	Kind    string `json:"kind"` // regression or duplicate
	Earlier Grant  `json:"earlier"`
	Later   Grant  `json:"later"`
	// Cause says why the fence went back, when the history shows it: a
	// failover between the two grants (INCR after failover).
	Cause string `json:"cause,omitempty"`
}

// Linearizability of the lock-protected read-modify-write history.
type Linearizability struct {
	Result     string    `json:"result"` // ok, illegal or unknown
	Operations int       `json:"operations"`
	Segments   int       `json:"segments"`
	Window     *Interval `json:"window,omitempty"` // the segment that was illegal or timed out
	Key        string    `json:"key,omitempty"`    // the key of that segment
	Detail     string    `json:"detail,omitempty"`
}

// Liveness: how the lock served its clients.
type Liveness struct {
	Grants         int     `json:"grants"`
	GrantsPerSec   float64 `json:"grants_per_sec"`
	LongestStallMs float64 `json:"longest_stall_ms"`
	// Stall is the longest stretch with no grant while clients were trying.
	Stall *Interval `json:"stall,omitempty"`
	// StuckUntilEnd is set when that stretch lasted to the end of the run.
	StuckUntilEnd   bool    `json:"stuck_until_end"`
	StallReason     string  `json:"stall_reason,omitempty"`
	StallKey        string  `json:"stall_key,omitempty"` // the key nobody got during the stall
	AcquireP50Ms    float64 `json:"acquire_p50_ms"`
	AcquireP99Ms    float64 `json:"acquire_p99_ms"`
	AcquireMaxMs    float64 `json:"acquire_max_ms"`
	AcquireAttempts int     `json:"acquire_attempts"`
	AcquireFailed   int     `json:"acquire_failed"`  // the lock was busy
	AcquireRefused  int     `json:"acquire_refused"` // the service would not write at all (NOREPLICAS, READONLY)
	AcquireUnknown  int     `json:"acquire_unknown"`
}

// MarshalIndent is a helper for tests and writers.
func (r *Result) MarshalIndent() ([]byte, error) { return json.MarshalIndent(r, "", "  ") }
