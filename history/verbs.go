package history

import (
	"maps"
	"slices"
)

// The one table of nemesis verbs: what each does to its target's state. The
// checker's fault intervals, the report's timeline and charts, and the
// harness's fault count all read it, so a fault with a new verb adds one row
// here.

// VerbRole is what a nemesis verb is.
type VerbRole int

// Verb roles.
const (
	// Point is a fault at one moment (a promotion, cutting replication
	// links); so is any verb not in the table.
	Point VerbRole = iota
	// Starts begins a fault that lasts until a verb that heals it.
	Starts
	// Heals ends a fault of the same target.
	Heals
	// Observes records something without faulting anything (the run's end,
	// an inspection, a failpoint reached, a role, a landing).
	Observes
)

// Verb describes one nemesis verb.
type Verb struct {
	Role VerbRole
	// Heals is, for a verb that heals, the verb of the fault it ends.
	Heals string
	// Ends lists, for a verb that starts a fault, the faults of the same
	// target it ends too: a kill ends a pause (a killed process is no
	// longer stopped), a clock jump ends the previous jump.
	Ends []string
	// UntilEnd makes an unhealed fault last to the end of the history; a
	// kill nobody restarts (a client's) stays a point.
	UntilEnd bool
	// State is what the target is while the fault lasts, for the report
	// ("paused", "killed", "cut off the network"); empty draws the fault
	// as any other.
	State string
	// Link is, for a verb that shapes its target's links to Links, what
	// it makes them ("slow", "flaky"): the report draws each such link on
	// the lanes of both its ends.
	Link string
	// Lane is how the report's timeline draws a node the verb names.
	Lane Lane
}

// Lane is what a verb shows on the lane of the node it names in the
// report's timeline: a mark (a bar, drawn as node-<Mark>) while the state
// it puts the node in lasts, and points. A verb that heals closes the mark
// of the fault it heals; a verb that starts a fault closes the marks of the
// faults it ends (Verb.Ends). A verb with a mark of its own closes one
// already open and opens its own. A verb with no mark that neither heals
// nor observes is a point on the lane.
type Lane struct {
	// Mark names the bar of the state the verb puts its node in.
	Mark string
	// Text is the mark's text: the verb's State when empty. FromDetail
	// takes it from the event's detail instead (a role), the verb's name
	// when the detail is empty; Offset follows Text with the clock offset
	// the detail ("+20s", "<Text> offset +20s") or DurationMs says, and
	// opens no mark for a zero offset.
	Text       string
	FromDetail bool
	Offset     bool
	// Point draws the event's detail as a point on the lane too, when it
	// has one, after Note ("restarted").
	Point bool
	Note  string
}

// NemCutReplicas closes a master's replication links; Target is the master.
const NemCutReplicas = "cut-replicas"

// The link faults: Target's links to Links are slowed (every message
// delayed by DurationMs, Detail gives latency and jitter) or made to reset
// a share of their connections, until the matching end.
const (
	NemSlowLink     = "slow-link"
	NemSlowLinkEnd  = "slow-link-end"
	NemFlakyLink    = "flaky-link"
	NemFlakyLinkEnd = "flaky-link-end"
)

var verbs = map[string]Verb{
	NemPause:        {Role: Starts, UntilEnd: true, State: "paused", Lane: Lane{Mark: "paused"}},
	NemResume:       {Role: Heals, Heals: NemPause},
	NemKill:         {Role: Starts, Ends: []string{NemPause}, State: "killed", Lane: Lane{Mark: "killed"}},
	NemStart:        {Role: Heals, Heals: NemKill, Lane: Lane{Point: true, Note: "restarted"}},
	NemClockJump:    {Role: Starts, Ends: []string{NemClockJump}, UntilEnd: true, Lane: Lane{Mark: "clock", Text: "clock", Offset: true}},
	NemClockReset:   {Role: Heals, Heals: NemClockJump},
	NemPartition:    {Role: Starts, UntilEnd: true, State: "cut off the network", Lane: Lane{Mark: "partitioned"}},
	NemHeal:         {Role: Heals, Heals: NemPartition, Lane: Lane{Point: true}},
	NemSlowLink:     {Role: Starts, UntilEnd: true, State: "on slow links", Link: "slow"},
	NemSlowLinkEnd:  {Role: Heals, Heals: NemSlowLink},
	NemFlakyLink:    {Role: Starts, UntilEnd: true, State: "on flaky links", Link: "flaky"},
	NemFlakyLinkEnd: {Role: Heals, Heals: NemFlakyLink},
	// The sentinels' view: the old master is not told, and may go on
	// serving as one until it reports its own role.
	NemSwitchMaster:    {Role: Point, Lane: Lane{Mark: "role", Text: "master", Point: true}},
	NemCutReplicas:     {Role: Point},
	NemKillSession:     {Role: Point},
	NemRunEnd:          {Role: Observes},
	NemInspect:         {Role: Observes},
	NemFailpoint:       {Role: Observes},
	NemRole:            {Role: Observes, Lane: Lane{Mark: "role", FromDetail: true}},
	NemLanding:         {Role: Observes},
	NemLockLost:        {Role: Observes},
	NemLockRenewed:     {Role: Observes},
	NemClientViolation: {Role: Observes},
	NemClientStart:     {Role: Observes},
}

// VerbOf looks a verb up; a verb not in the table is a point fault.
func VerbOf(name string) Verb { return verbs[name] }

// Verbs are the verbs of the table, sorted.
func Verbs() []string { return slices.Sorted(maps.Keys(verbs)) }

// ObservesOnly says whether a verb records something without acting on
// the node it may name: it observes, and draws no state of its own.
func (v Verb) ObservesOnly() bool { return v.Role == Observes && v.Lane.Mark == "" }
