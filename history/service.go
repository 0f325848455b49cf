package history

// What a replicated lock service does on its own, as the harness sees it
// (nemesis events of process "nemesis"): a promotion and every role change a
// node reports. They are observations, not faults the nemesis injected, but
// they tell who was master when.
const (
	// NemSwitchMaster is a promotion: the service's sentinels agreed that
	// Target is the master now. Detail says "old -> new".
	NemSwitchMaster = "switch-master"
	// NemRole is a role a node reported: Target is the node, Detail
	// "master" or "replica of <node>".
	NemRole = "role"
)

// RefusedPrefix starts the error text of an acquire the lock service
// certainly refused for a reason other than another client's hold, such as
// Redis's NOREPLICAS under min-replicas-to-write: the write was never
// executed. Such an acquire completes with fail, like a busy lock, and the
// checker counts it on its own.
const RefusedPrefix = "the lock service refused to write: "
