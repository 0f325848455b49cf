package nemesis

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/lockcheck/lockcheck/backends"
)

// Fault is one fault, declared: its name as the CLI spells it, what it does,
// the params it reads, what it needs of the running test, and how it is
// injected. Faults register themselves from their own file's init, so a new
// fault is one file.
type Fault struct {
	Name string
	Help string
	// Params are the run params (--skew, --restart-delay, ...) it reads;
	// Settings parses and checks them all once, when the run is configured.
	Params []string
	// Needs are the capabilities the running test must offer; Validate
	// refuses the fault, before anything starts, on a topology without
	// them.
	Needs []Capability
	// Inject injects the fault once and heals it before returning (unless
	// healing is someone else's job: a killed client is restarted by the
	// harness). Its Landing says whether the fault created the moment it
	// exists for; an error is a fault that could not be injected at all.
	Inject func(ctx context.Context, env *Env) (Landing, error)
}

// Landing says whether a fault met its precondition (the moment it exists
// to create: a second grant while the first lease is live, a holder stopped
// past its TTL, ...) and, either way, what happened.
type Landing struct {
	Landed bool
	Why    string
}

func landed(format string, a ...any) Landing {
	return Landing{Landed: true, Why: fmt.Sprintf(format, a...)}
}

func missed(format string, a ...any) Landing {
	return Landing{Why: fmt.Sprintf(format, a...)}
}

// Capability is something a fault needs of the running test.
type Capability string

// Capabilities a topology can offer.
const (
	// CapNodes: the run started the service's nodes and can signal them
	// (not so for a service that was already running, --addr).
	CapNodes Capability = "nodes"
	// CapRestart: every node can be killed and started again on its ports
	// (Restarter).
	CapRestart Capability = "restart"
	// CapClock: at least one node runs under a faked wall clock (Clock).
	CapClock Capability = "clock"
	// CapAllClocks: every node does, so any node of a majority can forget.
	CapAllClocks Capability = "all-clocks"
	// CapMajority: at least three nodes, so that a minority can be stopped
	// and a bare majority remains.
	CapMajority Capability = "majority"
	// CapPartition: a node can be cut off the network (Partitioner, or
	// the run's Network).
	CapPartition Capability = "partition"
	// CapLinks: single links between nodes and clients can be cut (the
	// run's Network: the process runtime's proxies, or rules in each
	// container's network namespace).
	CapLinks Capability = "links"
	// CapShape: single links can also be slowed or made to reset their
	// connections (the process runtime's proxies, or rules and a
	// netfilter queue in each container's network namespace).
	CapShape Capability = "shape"
	// CapLeader: the service names the node leading it (LeaderFinder).
	CapLeader Capability = "leader"
	// CapFailover: the service fails over by itself (FailoverService).
	CapFailover Capability = "failover"
	// CapSessions: the service's locks live on server sessions it can
	// terminate (SessionKiller).
	CapSessions Capability = "sessions"
	// CapPromote: the service has a streaming standby the nemesis can
	// promote (Promoter).
	CapPromote Capability = "promote"
	// CapWipe: any node restarted with its data wiped comes back by
	// itself. A fault that restarts nodes empty needs it: always
	// (clock-pause, restart-pause), or with --wipe (ParamWipe among its
	// Params).
	CapWipe Capability = "wipe"
)

// capabilityText says what a capability is, for the refusal of a fault
// that needs it.
var capabilityText = map[Capability]string{
	CapNodes:     "nodes lockcheck started (a service given with --addr has none it can stop)",
	CapRestart:   "nodes that can be killed and started again",
	CapClock:     "a node under a faked clock (libfaketime)",
	CapAllClocks: "every node under a faked clock (libfaketime)",
	CapMajority:  "at least three nodes, so that a bare majority remains when a minority stops",
	CapPartition: "nodes that can be cut off the network (--runtime docker, or --runtime process with --network proxy)",
	CapLinks:     "links between clients and nodes that lockcheck can cut one by one (--runtime process with --network proxy, or --runtime docker as root)",
	CapShape:     "links between clients and nodes that lockcheck can slow or reset one by one (--runtime process with --network proxy, or --runtime docker as root)",
	CapLeader:    "a service that names its leader",
	CapFailover:  "a service that fails over by itself",
	CapSessions:  "locks held on server sessions that can be terminated",
	CapPromote:   "a streaming standby the nemesis can promote (--backend postgres --replicas 1; a scenario's params: {replicas: 1})",
	CapWipe:      "nodes that come back by themselves when restarted with their data wiped (a wiped PostgreSQL primary with a standby has no primary to copy, and PostgreSQL promotes none by itself: drop --wipe or --replicas, or use failover-promote)",
}

// Topology is what a run will offer the nemesis, known before anything
// starts: TopologyOf derives it from what the harness knows of the run.
type Topology struct {
	Backend string // as --backend names it
	Runtime string // process or docker
	// Nodes and ClockNodes count the service's nodes and those under a
	// faked clock.
	Nodes, ClockNodes int
	Offers            []Capability
}

// Offer reports whether the topology offers c.
func (t Topology) Offer(c Capability) bool { return slices.Contains(t.Offers, c) }

// Facts are what the harness knows of a run before anything starts, the
// whole of what its capabilities follow from (TopologyOf).
type Facts struct {
	Backend, Runtime string
	// Nodes are the nodes the run starts; none for a service that is
	// already running (--addr).
	Nodes []backends.NodeSpec
	// OwnNetwork: the nodes run on a network of the run's own, from which
	// each can be disconnected (the docker runtime).
	OwnNetwork bool
	// Proxied: every connection goes through lockcheck's proxies, which
	// cut, slow and reset single links (the process runtime's --network
	// proxy).
	Proxied bool
	// NodesCutLinks: each node can drop, slow and reset the packets of
	// single links in its own network namespace (containers, on a host
	// with the tools for it).
	NodesCutLinks bool
	// Service is the type of the backend's service handle, nil when it has
	// none: the interfaces it implements are what it can do
	// (serviceCapabilities).
	Service reflect.Type
}

// serviceCapabilities are the capabilities a service handle offers by
// implementing an interface.
var serviceCapabilities = []struct {
	iface reflect.Type
	cap   Capability
}{
	{reflect.TypeFor[LeaderFinder](), CapLeader},
	{reflect.TypeFor[FailoverService](), CapFailover},
	{reflect.TypeFor[SessionKiller](), CapSessions},
	{reflect.TypeFor[Promoter](), CapPromote},
}

// TopologyOf is what a run with facts f offers the nemesis: the one rule
// of which capability comes from what.
func TopologyOf(f Facts) Topology {
	t := Topology{Backend: f.Backend, Runtime: f.Runtime, Nodes: len(f.Nodes)}
	for _, s := range f.Nodes {
		if s.FakeClock {
			t.ClockNodes++
		}
	}
	if t.Nodes == 0 {
		// Every capability is some node's.
		return t
	}
	// Every runtime restarts a node on its own ports (a Restarter).
	t.Offers = append(t.Offers, CapNodes, CapRestart)
	// A node that copies a peer when wiped has one to copy only when it
	// is not that peer itself.
	if t.Nodes == 1 || !slices.ContainsFunc(f.Nodes, func(s backends.NodeSpec) bool { return s.WipedCopiesPeer }) {
		t.Offers = append(t.Offers, CapWipe)
	}
	if t.ClockNodes > 0 {
		t.Offers = append(t.Offers, CapClock)
	}
	if t.ClockNodes == t.Nodes {
		t.Offers = append(t.Offers, CapAllClocks)
	}
	if t.Nodes >= 3 {
		t.Offers = append(t.Offers, CapMajority)
	}
	if f.OwnNetwork || f.Proxied {
		t.Offers = append(t.Offers, CapPartition)
	}
	if f.Proxied || f.NodesCutLinks {
		t.Offers = append(t.Offers, CapLinks, CapShape)
	}
	for _, sc := range serviceCapabilities {
		if f.Service != nil && f.Service.Implements(sc.iface) {
			t.Offers = append(t.Offers, sc.cap)
		}
	}
	return t
}

// CapabilityText says what capability c is, for a refusal of something
// that needs it.
func CapabilityText(c Capability) string { return capabilityText[c] }

// UnavailableError refuses a fault on a topology that lacks what it needs.
type UnavailableError struct {
	Fault string
	Need  Capability
	Top   Topology
	// OfferedBy names the backends (under this runtime) that offer Need,
	// when the caller knows them.
	OfferedBy []string
}

func (e *UnavailableError) Error() string {
	msg := fmt.Sprintf("--nemesis %s needs %s; backend %s under --runtime %s has none", e.Fault, capabilityText[e.Need], e.Top.Backend, e.Top.Runtime)
	if len(e.OfferedBy) > 0 {
		msg += " (backends that have it: " + strings.Join(e.OfferedBy, ", ") + ")"
	}
	return msg
}

// Validate checks, before a run starts, that every fault exists, that its
// params are valid and that the topology offers what it needs. run, compare
// and scenario all call it.
func Validate(faults []string, params map[string]string, top Topology) error {
	s, err := ParseSettings(params)
	if err != nil {
		return err
	}
	for _, name := range faults {
		f, ok := registry[name]
		if !ok {
			return fmt.Errorf("unknown nemesis %q (choose none or a comma-separated list of: %s)", name, strings.Join(Names(), ", "))
		}
		if len(f.Needs) > 0 && !top.Offer(CapNodes) {
			// Every capability is some node's: a service lockcheck did not
			// start lacks them all, and that is the reason to give.
			return &UnavailableError{Fault: name, Need: CapNodes, Top: top}
		}
		for _, need := range f.needs(s) {
			if !top.Offer(need) {
				return &UnavailableError{Fault: name, Need: need, Top: top}
			}
		}
		if name == "clock-skew" {
			if minority := (top.ClockNodes - 1) / 2; s.Clock.Nodes > minority {
				return fmt.Errorf("--%s %d: at most %d of the %d nodes of %s is a minority", ParamSkewNodes, s.Clock.Nodes, minority, top.ClockNodes, top.Backend)
			}
		}
	}
	return nil
}

// needs are what the fault needs with settings s: its Needs, and CapWipe
// when it restarts nodes and --wipe says they come back empty.
func (f *Fault) needs(s Settings) []Capability {
	if s.Wipe && slices.Contains(f.Params, ParamWipe) {
		return append(slices.Clone(f.Needs), CapWipe)
	}
	return f.Needs
}

// registry holds the faults by name.
var registry = map[string]*Fault{}

// register adds a fault; each fault's file calls it from init.
func register(f Fault) {
	if _, dup := registry[f.Name]; dup {
		panic("nemesis: fault registered twice: " + f.Name)
	}
	registry[f.Name] = &f
}

// Lookup finds a fault by name.
func Lookup(name string) (Fault, bool) {
	f, ok := registry[name]
	if !ok {
		return Fault{}, false
	}
	return *f, true
}

// Names lists the faults, sorted.
func Names() []string { return slices.Sorted(maps.Keys(registry)) }

// Help explains a fault for --help; "none" is no faults.
func Help(name string) string {
	if name == "none" {
		return "no faults"
	}
	if f, ok := registry[name]; ok {
		return f.Help
	}
	return ""
}

// Parse reads a comma-separated fault list; "none" or "" is no faults.
func Parse(s string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" || name == "none" {
			continue
		}
		if _, ok := registry[name]; !ok {
			return nil, fmt.Errorf("unknown nemesis %q (choose none or a comma-separated list of: %s)", name, strings.Join(Names(), ", "))
		}
		out = append(out, name)
	}
	return out, nil
}

// Settings are the run's fault params, parsed and checked once.
type Settings struct {
	Clock ClockConfig
	// RestartDelay is how long a killed node stays down before it starts
	// again (kill-restart, restart-pause).
	RestartDelay time.Duration
	// Wipe makes a restarted node come back with no data.
	Wipe bool
	// Links shape the network faults' links.
	Links LinkConfig
}

// Params of the node faults.
const (
	ParamWipe         = "wipe"          // "true": a restarted node comes back empty
	ParamRestartDelay = "restart-delay" // a Go duration between kill and start
)

// ParseSettings reads and checks the fault params; absent ones take their
// defaults.
func ParseSettings(params map[string]string) (Settings, error) {
	clock, err := ClockSettings(params)
	if err != nil {
		return Settings{}, err
	}
	links, err := LinkSettings(params)
	if err != nil {
		return Settings{}, err
	}
	s := Settings{Clock: clock, Links: links, Wipe: params[ParamWipe] == "true"}
	if v := params[ParamRestartDelay]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return s, fmt.Errorf("--%s %q: want a duration of 0 or more, such as 1s", ParamRestartDelay, v)
		}
		s.RestartDelay = d
	}
	return s, nil
}

// wipeDetail is how a restart's events describe what the node kept.
func (s Settings) wipeDetail() string {
	if s.Wipe {
		return DetailWiped
	}
	return "data kept"
}

// DetailWiped is the Detail of the kill and start events of a node
// restarted with its data wiped.
const DetailWiped = "data wiped"
