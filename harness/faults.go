package harness

import (
	"errors"
	"slices"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/nemesis"
)

// CheckFaults refuses, before anything starts, faults the run's topology
// cannot take: each fault declares what it needs, the topology what it
// offers (nemesis.Validate). A refusal names the backends that would offer
// what is missing. run, compare and scenario all come through here.
func CheckFaults(cfg Config, b catalog.Backend) error {
	err := nemesis.Validate(faultNames(cfg), cfg.Run.Params, faultTopology(cfg, b))
	var missing *nemesis.UnavailableError
	if errors.As(err, &missing) {
		for _, name := range catalog.Names() {
			other, _, lerr := catalog.Lookup(name, "")
			if lerr != nil {
				continue
			}
			alt := cfg
			alt.Run.Backend = name
			if faultTopology(alt, other).Offer(missing.Need) {
				missing.OfferedBy = append(missing.OfferedBy, name)
			}
		}
	}
	return err
}

// faultNames are the faults the run injects: its --nemesis, or the fault
// actions of its script, which run whole faults.
func faultNames(cfg Config) []string {
	if cfg.Script == nil {
		return cfg.Run.Nemesis
	}
	var faults []string
	for _, a := range cfg.Script {
		if a.Do == "fault" {
			faults = append(faults, a.Fault)
		}
	}
	return faults
}

// faultTopology is what a run of cfg against b will offer the nemesis,
// derived from the backend's node specs, the type of its service handle and
// the runtime.
func faultTopology(cfg Config, b catalog.Backend) nemesis.Topology {
	specs := nodeSpecs(cfg, b)
	t := nemesis.Topology{Backend: cfg.Run.Backend, Runtime: runtimeOf(cfg), Nodes: len(specs)}
	for _, s := range specs {
		if s.FakeClock {
			t.ClockNodes++
		}
	}
	// Both runtimes restart a node on its own ports (server is a
	// nemesis.Restarter), if they started any.
	if t.Nodes > 0 {
		t.Offers = append(t.Offers, nemesis.CapNodes, nemesis.CapRestart)
		// A node that copies a peer when wiped has one to copy only when
		// it is not that peer itself.
		if len(specs) == 1 || !slices.ContainsFunc(specs, func(s backends.NodeSpec) bool { return s.WipedCopiesPeer }) {
			t.Offers = append(t.Offers, nemesis.CapWipe)
		}
	}
	if t.ClockNodes > 0 {
		t.Offers = append(t.Offers, nemesis.CapClock)
	}
	if t.ClockNodes > 0 && t.ClockNodes == t.Nodes {
		t.Offers = append(t.Offers, nemesis.CapAllClocks)
	}
	if t.Nodes >= 3 {
		t.Offers = append(t.Offers, nemesis.CapMajority)
	}
	if t.Runtime == RuntimeDocker {
		// Containers on the run's own network can be disconnected from it.
		t.Offers = append(t.Offers, nemesis.CapPartition)
	}
	if networkOf(cfg, specs) == NetworkProxy {
		// Every connection goes through lockcheck's proxies.
		t.Offers = append(t.Offers, nemesis.CapPartition, nemesis.CapLinks, nemesis.CapShape)
	}
	if t.Runtime == RuntimeDocker && t.Nodes > 0 && checkLinkTools() == nil {
		// Each node drops the addresses it is cut from, and holds or
		// resets the packets of the links it slows or makes flaky.
		t.Offers = append(t.Offers, nemesis.CapLinks, nemesis.CapShape)
	}
	if b.Service != nil && t.Nodes > 0 {
		// The handle's type says what it can do; it is built on endpoints
		// that serve nothing yet, and only its type is looked at.
		eps := make([]backends.Endpoint, len(specs))
		for i, s := range specs {
			eps[i] = backends.Endpoint{Name: s.Name, Ports: make([]int, max(s.Ports, 1))}
		}
		svc := b.Service(eps)
		if _, ok := svc.(nemesis.LeaderFinder); ok {
			t.Offers = append(t.Offers, nemesis.CapLeader)
		}
		if _, ok := svc.(nemesis.FailoverService); ok {
			t.Offers = append(t.Offers, nemesis.CapFailover)
		}
		if _, ok := svc.(nemesis.SessionKiller); ok {
			t.Offers = append(t.Offers, nemesis.CapSessions)
		}
		if _, ok := svc.(nemesis.Promoter); ok {
			t.Offers = append(t.Offers, nemesis.CapPromote)
		}
	}
	return t
}
