// Package history defines lockcheck's history: the JSON Lines record of a run
// that is the only seam between running a test and checking it.
//
// A history file starts with one Header line and continues with one Event per
// line. Every client operation is an invoke event followed by exactly one
// completion (ok, fail or info) from the same process. Nemesis events are info
// events of the process "nemesis".
package history

import (
	"fmt"
	"strconv"
)

// SchemaVersion is the version of the history format this package writes.
// Readers accept every version up to and including it.
const SchemaVersion = 1

// Type is an event's type.
type Type string

// Event types, as in Jepsen.
const (
	Invoke Type = "invoke"
	OK     Type = "ok"
	Fail   Type = "fail" // the operation certainly did not happen
	Info   Type = "info" // unknown outcome, or a nemesis event
)

// Client operation functions.
const (
	FAcquire = "acquire"
	FRelease = "release"
	FExtend  = "extend"
	FRead    = "read"
	FWrite   = "write"
)

// Process identifies who performed an event: a client process number (0 and
// up) or the nemesis. A client process that completes an operation with info
// is retired and its worker continues under a new process number.
type Process int

// Nemesis is the process of fault events. It marshals as "nemesis".
const Nemesis Process = -1

// MarshalJSON writes client processes as numbers and the nemesis as "nemesis".
func (p Process) MarshalJSON() ([]byte, error) {
	if p == Nemesis {
		return []byte(`"nemesis"`), nil
	}
	return strconv.AppendInt(nil, int64(p), 10), nil
}

// UnmarshalJSON accepts a non-negative number or "nemesis".
func (p *Process) UnmarshalJSON(b []byte) error {
	if string(b) == `"nemesis"` {
		*p = Nemesis
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("process must be a non-negative number or \"nemesis\", got %s", b)
	}
	*p = Process(n)
	return nil
}

// String names the process as the report shows it: c3 for client process 3.
func (p Process) String() string {
	if p == Nemesis {
		return "nemesis"
	}
	return "c" + strconv.Itoa(int(p))
}

// Event is one line of a history.
type Event struct {
	Index   int64   `json:"index"`
	Time    int64   `json:"time"` // nanoseconds on the host's CLOCK_MONOTONIC
	Process Process `json:"process"`
	Type    Type    `json:"type"`
	F       string  `json:"f"`
	Key     string  `json:"key,omitempty"`
	Value   *Value  `json:"value,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// Value carries what an operation sent or got back. Which fields are set
// depends on the function:
//
//   - acquire ok: Token, Fence (absent when the backend hands out none),
//     TTLms (the lease length the backend promises), Deadline (the client's own
//     validity deadline, CLOCK_MONOTONIC ns), Nodes (for a lock won on
//     several nodes, the nodes that granted it).
//   - extend invoke/ok: Token, TTLms.
//   - release invoke: Token, and Detail "lease lost" when the client noticed
//     that its lease was gone (an etcd session that expired) before releasing.
//   - read ok: Value (the resource's value).
//   - write invoke: Value (the value written), Read (the value it was computed
//     from), Fence (the fence the client holds), Req (the request id the
//     resource logs).
//   - write ok: Accepted, Prev (the resource's value before the write).
//   - acquire fail: Refused when the service would not write at all.
//   - nemesis events: Target, PID, DurationMs, Failpoint, Detail, Step; clock
//     events also OffsetMs; landing events Fault, Landed and Detail.
type Value struct {
	Token      string `json:"token,omitempty"`
	Fence      *int64 `json:"fence,omitempty"`
	TTLms      int64  `json:"ttl_ms,omitempty"`
	Deadline   int64  `json:"deadline,omitempty"`
	Value      *int64 `json:"value,omitempty"`
	Read       *int64 `json:"read,omitempty"`
	Prev       *int64 `json:"prev,omitempty"`
	Accepted   *bool  `json:"accepted,omitempty"`
	Req        string `json:"req,omitempty"`
	Target     string `json:"target,omitempty"`
	PID        int    `json:"pid,omitempty"`
	DurationMs int64  `json:"duration_ms,omitempty"`
	Failpoint  string `json:"failpoint,omitempty"`
	Detail     string `json:"detail,omitempty"`
	// Nodes are the nodes that granted a multi-node lock (Redlock).
	Nodes []string `json:"nodes,omitempty"`
	// Session names the server session a lease is bound to (acquire ok of
	// a PostgreSQL advisory lock: node/backend pid), and the session a
	// kill-session event terminated.
	Session string `json:"session,omitempty"`
	// Via, on an acquire ok bound to a session, names the node the
	// session's statements go through (a pooler, pgbouncer-0): a kill of
	// it ends the session, as a kill of the session's own node does.
	Via string `json:"via,omitempty"`
	// OffsetMs is a node's wall clock offset from the host's, as read back
	// from the node after a clock fault moved it.
	OffsetMs *int64 `json:"offset_ms,omitempty"`
	// Step numbers the nemesis step an event belongs to: every event a
	// fault records, and its landing, carry the same step. lockcheck
	// numbers its steps from 1; a history from another program may start
	// at 0, so absent (nil) is no step, and 0 is a step like any other.
	Step *int `json:"step,omitempty"`
	// Fault names the fault of a landing event (clock-pause, ...).
	Fault string `json:"fault,omitempty"`
	// Landed, on a landing event, says whether the step's fault met the
	// precondition it exists to create; Detail says why or why not.
	Landed *bool `json:"landed,omitempty"`
	// Refused, on an acquire fail, says that the lock service would not
	// write at all (NOREPLICAS, READONLY) rather than finding the lock
	// busy.
	Refused bool `json:"refused,omitempty"`
	// NotSent, on an acquire fail, says that the lock client refused it
	// itself and sent nothing to the service (it was not connected): the
	// service refused nothing.
	NotSent bool `json:"not_sent,omitempty"`
	// Links, on a partition event, names everyone its target was cut
	// from; on a slow-link or flaky-link event, the other ends of the
	// target's links that the fault shaped.
	Links []string `json:"links,omitempty"`
	// Rule, on a client-violation event, is the rule of the client
	// protocol the client broke (docs/clients.md).
	Rule string `json:"rule,omitempty"`
}

// Int64 returns a pointer to n, for the optional numeric fields of Value.
func Int64(n int64) *int64 { return &n }

// Int returns a pointer to n, for Value.Step.
func Int(n int) *int { return &n }

// Bool returns a pointer to b, for Value.Accepted.
func Bool(b bool) *bool { return &b }

// Header is the first line of a history file.
type Header struct {
	Version int `json:"lockcheck_history"`
	// Started is the wall-clock start of the run (RFC 3339), for people only.
	Started string `json:"started,omitempty"`
	// StartTime and EndTime bound the run on CLOCK_MONOTONIC. EndTime is
	// only known to a reader when the run finished; see Footer.
	StartTime int64 `json:"start_time"`
	// Config is the run's configuration as the harness saw it.
	Config RunConfig `json:"config"`
	// Head, on every segment of a soak but the first, is what the
	// segment carries over from the ones before it.
	Head *SegmentHead `json:"head,omitempty"`
	// WallOffset, if set, is how a history of another program carried
	// server-side wall-clock times onto its clock: the offset (wall clock
	// minus the history's clock, ns) measured at the start and at the end
	// of the run. lockcheck's own histories need none.
	WallOffset *WallOffset `json:"wall_offset_ns,omitempty"`
}

// WallOffset is a wall-clock offset measured at the start and at the end
// of a run (docs/history.md, "Times from a server's clock").
type WallOffset struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// Drift is how far the offset moved during the run, in ns: how far a time
// carried over with one of the two offsets may be off.
func (w WallOffset) Drift() int64 {
	if w.End > w.Start {
		return w.End - w.Start
	}
	return w.Start - w.End
}

// SegmentHead is what a soak's segment carries over from the segments
// before it. A soak is one run whose history is rotated into segments
// while its clients go on: at each boundary every client finishes its
// cycle and waits, the faults heal, and the leases the clients held run
// out (the lease the backend grants, LeaseMs, is waited out) before the
// next segment's first operation, so no pending operation, fault or lease
// bounded by a TTL crosses a boundary (docs/history.md says what still can). What does cross is per
// key: the fences handed out, and the resource's value and highest
// written fence.
type SegmentHead struct {
	// Segment is this segment's number, from 1 (the first has no head).
	Segment int `json:"segment"`
	// Keys is every key an earlier segment named, in name order.
	Keys []KeyHead `json:"keys"`
}

// KeyHead is one key's state at the start of a segment.
type KeyHead struct {
	Key string `json:"key"`
	// Fence is the highest fence a grant of the key carried in the earlier
	// segments: every later grant must carry a higher one.
	Fence *int64 `json:"fence,omitempty"`
	// Value is the resource's value for the key at the boundary, and
	// WrittenFence the highest fence it accepted a write with (in fenced
	// mode): a later write accepted with a lower fence is stale. Both are
	// absent when the resource does not report them.
	Value        *int64 `json:"value,omitempty"`
	WrittenFence *int64 `json:"written_fence,omitempty"`
}

// RunConfig is the configuration of a run, as recorded in the history header
// and results.json. Later versions add fields and never rename them.
type RunConfig struct {
	Backend     string `json:"backend"`
	Variant     string `json:"variant,omitempty"`
	Workload    string `json:"workload"` // "fenced" or "unfenced"
	FenceSource string `json:"fence_source,omitempty"`
	// Resource is the protected resource: "memory" (lockcheck's own
	// store) or "postgres" (a row of a real database, fenced by its own
	// conditional UPDATE). Absent means memory.
	Resource string `json:"resource,omitempty"`
	// WritesInLockTx says each write ran inside the lock's own
	// transaction (the postgres backend's xact variant): it commits only
	// together with the lock, so a holder whose lock is gone cannot write,
	// as if a fence stopped it.
	WritesInLockTx bool              `json:"writes_in_lock_tx,omitempty"`
	Nemesis        []string          `json:"nemesis"`
	Seed           int64             `json:"seed"`
	Clients        int               `json:"clients"`
	Keys           int               `json:"keys"`
	TTLms          int64             `json:"ttl_ms"`
	TimeLimitMs    int64             `json:"time_limit_ms"`
	PauseMs        int64             `json:"pause_ms,omitempty"`
	NemesisEveryMs int64             `json:"nemesis_interval_ms,omitempty"`
	LeaseMs        int64             `json:"lease_ms,omitempty"` // the lease the backend really grants for TTLms
	Think          string            `json:"think,omitempty"`
	CommandLine    []string          `json:"command_line,omitempty"`
	Versions       map[string]string `json:"versions,omitempty"`
	// Client, if set, is the lock client program the run tested
	// (lockcheck run --client, docs/clients.md).
	Client *ClientInfo `json:"client,omitempty"`
	// Scenario describes the incident a scripted run reproduces.
	Scenario *ScenarioInfo `json:"scenario,omitempty"`
	// Params are backend- and fault-specific settings (Sentinel timings,
	// clock skew, ...), as the flags set them.
	Params map[string]string `json:"params,omitempty"`
	// PauseDistribution, when set, is what each fault drew its pause
	// from (a range, or a measured distribution's percentiles); PauseMs
	// is then its greatest.
	PauseDistribution string `json:"pause_distribution,omitempty"`
}

// ClientInfo describes a lock client program: its command, the name it
// was tested under, the library and version it said it is (init_ok), and
// the built-in backend whose servers it talked to.
type ClientInfo struct {
	Command  []string `json:"command"`
	Name     string   `json:"name"`
	Library  string   `json:"library"`
	Version  string   `json:"version"`
	Topology string   `json:"topology"`
}

// ScenarioInfo names a scenario and says, in the terms of the account it
// reproduces, what it shows.
type ScenarioInfo struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Source  string `json:"source,omitempty"`
	Explain string `json:"explain,omitempty"`
}

// Fenced reports whether the workload's resource refuses stale fences.
func (c RunConfig) Fenced() bool { return c.Workload == "fenced" }

// Guarded reports whether a holder that lost its lock cannot write: the
// resource refuses stale fences, or each write commits with the lock.
func (c RunConfig) Guarded() bool { return c.Fenced() || c.WritesInLockTx }

// RunEndInterrupted is the detail of a run-end event when the run stopped
// before its time limit: alone for Ctrl-C, or followed by ": " and the
// cause ("interrupted: recording resource.jsonl failed: no space left on
// device").
const RunEndInterrupted = "interrupted"

// RunEndSegment is the detail of the run-end event that ends a soak's
// segment at its boundary (SegmentHead): the run goes on in the next
// segment's history.
const RunEndSegment = "segment"

// Nemesis verbs. Each fault records a start event and, where it has one, an
// end event carrying the same Target.
const (
	NemPause     = "pause"     // SIGSTOP of Target
	NemResume    = "resume"    // SIGCONT of Target
	NemKill      = "kill"      // SIGKILL of Target
	NemStart     = "start"     // Target (re)started
	NemRunEnd    = "run-end"   // the workload stopped; last event of a finished run
	NemInspect   = "inspect"   // an observation of the lock service at the end of the run
	NemFailpoint = "failpoint" // a client reached an armed failpoint (Target, Failpoint)
	// NemClockJump moves Target's wall clock: Detail is the offset set
	// ("+20s", or a strobe), OffsetMs the offset read back from the node.
	NemClockJump = "clock-jump"
	// NemClockReset puts Target's wall clock back (Detail "reset").
	NemClockReset = "clock-reset"
	// NemPartition cuts Target off the run's network: no node and no
	// client reaches it, and it reaches no one.
	NemPartition = "partition"
	// NemHeal connects a partitioned Target again.
	NemHeal = "heal"
	// NemKillSession terminates Session, the server session of client
	// Target (PostgreSQL's pg_terminate_backend): the session's locks end
	// at once. It is recorded before the terminate is sent; when that did
	// not land, a second event for the same Session has Detail
	// MissedPrefix + why.
	NemKillSession = "kill-session"
	// NemLanding ends every nemesis step: Fault is the step's fault,
	// Landed whether it met its precondition, Detail why or why not.
	NemLanding = "landing"
	// NemLockLost records that the library of a lock client program said
	// it lost the lock on Key (a lost message, docs/clients.md): Target is
	// the client's process, Token its grant, Detail why. Its time against
	// the next grant of Key says how late the library told the application.
	NemLockLost = "lock-lost"
	// NemLockRenewed records a renewal the library of a lock client
	// program made on its own (a renewed message) that cannot be placed in
	// its process's sequence as an extend: Target is the client's process,
	// Token its grant, TTLms the lease renewed, Detail why it is not an
	// extend. It is an observation: it pushes no lease out, so a renewal
	// whose start is unknown never makes the checker's certain lease end
	// later than the service's.
	NemLockRenewed = "lock-renewed"
	// NemClientViolation records that a lock client program broke a rule
	// of the client protocol (docs/clients.md) and was ended for it:
	// Target is the client's process, Rule the rule, Detail what it sent
	// (the line, cut). A run with one is unknown: the program was not
	// tested as its library runs.
	NemClientViolation = "client-violation"
	// NemClientStart records that a client's lock client program was
	// started again in its slot, after it died or was killed, before the
	// client's next operation: Target is the client's new process,
	// DurationMs how long the start and its init took. The operation's
	// invoke comes after it: a restart is not a wait for the lock.
	NemClientStart = "client-start"
)

// MissedPrefix starts the Detail of a nemesis event that says the fault
// named did not land.
const MissedPrefix = "missed: "
