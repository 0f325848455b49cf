package harness

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/nemesis"
)

// CheckFaults refuses, before anything starts, faults the run's topology
// cannot take: each fault declares what it needs, the topology what it
// offers (nemesis.Validate). A refusal names the backends that would offer
// what is missing. run, compare and scenario all come through here.
func CheckFaults(cfg Config, b catalog.Backend) error {
	top := faultTopology(cfg, b)
	for i, a := range cfg.Script {
		for _, need := range a.Needs() {
			if !top.Offer(need) {
				return fmt.Errorf("step %d (%s %s) needs %s; backend %s under --runtime %s has none", i+1, a.Do, a.Target, nemesis.CapabilityText(need), top.Backend, top.Runtime)
			}
		}
	}
	err := nemesis.Validate(faultNames(cfg), cfg.Run.Params, top)
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

// faultTopology is what a run of cfg against b will offer the nemesis:
// the harness hands nemesis.TopologyOf what it knows of the run.
func faultTopology(cfg Config, b catalog.Backend) nemesis.Topology {
	specs := nodeSpecs(cfg, b)
	rt := runtimeOf(cfg)
	f := nemesis.Facts{
		Backend: cfg.Run.Backend, Runtime: rt, Nodes: specs,
		// Containers on the run's own network can be disconnected from it.
		OwnNetwork: rt == RuntimeDocker,
		Proxied:    networkOf(cfg, specs) == NetworkProxy,
		// Each container drops the addresses it is cut from, and holds or
		// resets the packets of the links it slows or makes flaky.
		NodesCutLinks: rt == RuntimeDocker && checkLinkTools() == nil,
	}
	if b.Service != nil && len(specs) > 0 {
		// Only the handle's type is looked at: it is built on endpoints
		// that serve nothing yet.
		eps := make([]backends.Endpoint, len(specs))
		for i, s := range specs {
			eps[i] = backends.Endpoint{Name: s.Name, Ports: make([]int, max(s.Ports, 1))}
		}
		f.Service = reflect.TypeOf(b.Service(eps))
	}
	return nemesis.TopologyOf(f)
}
