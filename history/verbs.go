package history

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
	NemPause:        {Role: Starts, UntilEnd: true, State: "paused"},
	NemResume:       {Role: Heals, Heals: NemPause},
	NemKill:         {Role: Starts, Ends: []string{NemPause}, State: "killed"},
	NemStart:        {Role: Heals, Heals: NemKill},
	NemClockJump:    {Role: Starts, Ends: []string{NemClockJump}, UntilEnd: true},
	NemClockReset:   {Role: Heals, Heals: NemClockJump},
	NemPartition:    {Role: Starts, UntilEnd: true, State: "cut off the network"},
	NemHeal:         {Role: Heals, Heals: NemPartition},
	NemSlowLink:     {Role: Starts, UntilEnd: true, State: "on slow links", Link: "slow"},
	NemSlowLinkEnd:  {Role: Heals, Heals: NemSlowLink},
	NemFlakyLink:    {Role: Starts, UntilEnd: true, State: "on flaky links", Link: "flaky"},
	NemFlakyLinkEnd: {Role: Heals, Heals: NemFlakyLink},
	NemSwitchMaster: {Role: Point},
	NemCutReplicas:  {Role: Point},
	NemKillSession:  {Role: Point},
	NemRunEnd:       {Role: Observes},
	NemInspect:      {Role: Observes},
	NemFailpoint:    {Role: Observes},
	NemRole:         {Role: Observes},
	NemLanding:      {Role: Observes},
	NemLockLost:     {Role: Observes},
}

// VerbOf looks a verb up; a verb not in the table is a point fault.
func VerbOf(name string) Verb { return verbs[name] }
