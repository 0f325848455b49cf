package scenario

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/nemesis"
	"github.com/lockcheck/lockcheck/workloads"
)

// errAt names the line of a field.
func (f *File) errAt(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if line, ok := f.lines[field]; ok {
		return fmt.Errorf("line %d: %s: %s", line, lastPart(field), msg)
	}
	return fmt.Errorf("%s: %s", field, msg)
}

// lastPart is the field's own name: "target" of "timeline[2].target",
// "counts" of "expect.counts[resource.lost_updates]".
func lastPart(field string) string {
	if i := strings.IndexByte(field, '['); i >= 0 && strings.HasSuffix(field, "]") && strings.Contains(field[:i], ".") {
		field = field[:i] // a counts key: name the counts
	}
	if i := strings.LastIndexByte(field, '.'); i >= 0 {
		return field[i+1:]
	}
	return field
}

// validate checks a resolved file against what a run can do, each error
// naming the field's line.
func (f *File) validate() error {
	if f.Name == "" {
		return errors.New(`missing "name"`)
	}
	if err := f.validateNumbers(); err != nil {
		return err
	}
	if err := f.resolve(); err != nil {
		return err
	}
	if err := f.validateParams(); err != nil {
		return err
	}
	b, variant := f.target, f.Variant
	if f.Workload != workloads.Fenced && f.Workload != workloads.Unfenced {
		return f.errAt("workload", "%q is not fenced or unfenced", f.Workload)
	}
	if _, err := workloads.ParseDistribution(f.Think); err != nil {
		return f.errAt("think", "%v", err)
	}
	nodes := map[string]bool{}
	for _, spec := range b.Nodes(catalog.Programs{}, f.Params) {
		nodes[spec.Name] = true
	}
	clients := map[string]bool{}
	for i := 0; i < f.Clients; i++ {
		clients[fmt.Sprintf("c%d", i)] = true
	}
	moments := append([]string{nemesis.MomentAcquired, nemesis.MomentEmptyRelease, nemesis.MomentFailoverGrant, workloads.FailpointBeforeWrite, workloads.FailpointBeforeLeaseCheck, workloads.FailpointBeforeAcquire}, b.Failpoints[variant]...)
	if len(nodes) >= 3 {
		moments = append(moments, nemesis.MomentBareMajority)
	}
	for i, s := range f.Timeline {
		at := fmt.Sprintf("timeline[%d]", i)
		if !slices.Contains(nemesis.ScriptVerbs, s.Do) {
			return f.errAt(at+".do", "unknown action %q (choose one of: %s)", s.Do, strings.Join(nemesis.ScriptVerbs, ", "))
		}
		if s.When != nil {
			if s.When.Client == nemesis.AnyClient && !slices.Contains(nemesis.AnyClientMoments, s.When.Reaches) {
				return f.errAt(at+".when", "client %q: only %s wait for any client; name one (this scenario has %s)", nemesis.AnyClient, strings.Join(nemesis.AnyClientMoments, " and "), names(clients))
			}
			if !clients[s.When.Client] && s.When.Client != nemesis.AnyClient {
				return f.errAt(at+".when", "unknown client %q (this scenario has %s)", s.When.Client, names(clients))
			}
			// A client program declares its failpoints when it starts:
			// the run refuses a step waiting for one it does not have.
			if b.Client == nil && !slices.Contains(moments, s.When.Reaches) {
				return f.errAt(at+".when", "unknown moment %q (choose one of: %s)", s.When.Reaches, strings.Join(moments, ", "))
			}
			switch {
			case s.When.Node != "" && s.When.Reaches != nemesis.MomentBareMajority:
				return f.errAt(at+".when", "node %q: only %s names a node; drop node or wait for %s", s.When.Node, nemesis.MomentBareMajority, nemesis.MomentBareMajority)
			case s.When.Node != "" && !nodes[s.When.Node]:
				return f.errAt(at+".when", "unknown node %q (this scenario has %s)", s.When.Node, names(nodes))
			}
		}
		if s.Do == "fault" {
			if _, ok := nemesis.Lookup(s.Fault); !ok {
				return f.errAt(at+".fault", "unknown fault %q (choose one of: %s)", s.Fault, strings.Join(nemesis.Names(), ", "))
			}
			continue
		}
		if !nodes[s.Target] && !clients[s.Target] {
			return f.errAt(at+".target", "unknown node or client %q (this scenario has %s and %s)", s.Target, names(nodes), names(clients))
		}
		if (s.Do == "restart" || s.Do == "clock") && !nodes[s.Target] {
			return f.errAt(at+".target", "%s needs a node, and %q is a client", s.Do, s.Target)
		}
		if err := f.validateLinks(at, s, nodes, clients); err != nil {
			return err
		}
	}
	for _, c := range append(slices.Clone(f.Expect.Fail), f.Expect.Hold...) {
		if !slices.Contains(Checks, c) {
			return f.errAt("expect", "unknown check %q (choose one of: %s)", c, strings.Join(Checks, ", "))
		}
	}
	for _, path := range slices.Sorted(maps.Keys(f.Expect.Counts)) {
		at := "expect.counts[" + path + "]"
		if _, _, err := parseCondition(f.Expect.Counts[path]); err != nil {
			return f.errAt(at, "%s: %v", path, err)
		}
		if err := countPathError(path); err != nil {
			return f.errAt(at, "%v", err)
		}
	}
	if f.Expect.Landed != "" {
		if _, _, err := parseCondition(f.Expect.Landed); err != nil {
			return f.errAt("expect.landed", "%v", err)
		}
	}
	switch f.Expect.Verdict {
	case "", "true", "false", "unknown", VerdictNotTrue:
	default:
		return f.errAt("expect", "verdict %q is not true, false, unknown or %q", f.Expect.Verdict, VerdictNotTrue)
	}
	return nil
}

// validateNumbers refuses numbers that would run a scenario that tests
// nothing: a TTL or time limit that is not positive (every acquire refused
// with "invalid expire time"), no clients, a step before the start or
// after the end of the run, a negative pause.
func (f *File) validateNumbers() error {
	switch {
	case f.TTL <= 0:
		return f.errAt("ttl", "expected a positive duration such as 500ms, got %s", f.TTL.D())
	case f.TimeLimit <= 0:
		return f.errAt("time_limit", "expected a positive duration such as 5s, got %s", f.TimeLimit.D())
	case f.Clients < 1:
		return f.errAt("clients", "expected at least 1 client, got %d", f.Clients)
	case f.OpTimeout < 0:
		return f.errAt("op_timeout", "expected a positive duration such as 2s (or none: run's default), got %s", f.OpTimeout.D())
	}
	for i, s := range f.Timeline {
		at := fmt.Sprintf("timeline[%d]", i)
		switch {
		case s.At < 0:
			return f.errAt(at+".at", "expected a time since the workload started, 0 or later, got %s", s.At.D())
		case s.At >= f.TimeLimit:
			return f.errAt(at+".at", "%s is not before time_limit %s: the step would never run", s.At.D(), f.TimeLimit.D())
		case s.For < 0:
			return f.errAt(at+".for", "expected a positive duration (or none: until a resume or the end), got %s", s.For.D())
		}
	}
	return nil
}

// validateLinks checks a partition's links, which only a partition has:
// at least one, each a node or client other than its target, and a
// duration after which the cut heals.
func (f *File) validateLinks(at string, s Step, nodes, clients map[string]bool) error {
	if s.Do != "partition" {
		if len(s.Links) > 0 {
			return f.errAt(at+".links", "only a partition cuts links; drop links or make the step do: partition")
		}
		return nil
	}
	if len(s.Links) == 0 {
		return f.errAt(at+".do", "a partition needs links: the nodes and clients to cut %s from, such as [%s]", s.Target, strings.Join(slices.DeleteFunc(slices.Sorted(maps.Keys(nodes)), func(n string) bool { return n == s.Target }), ", "))
	}
	for _, l := range s.Links {
		switch {
		case l == s.Target:
			return f.errAt(at+".links", "%q is the partition's own target: name the nodes and clients cut from it", l)
		case !nodes[l] && !clients[l]:
			return f.errAt(at+".links", "unknown node or client %q (this scenario has %s and %s)", l, names(nodes), names(clients))
		}
	}
	if s.For <= 0 {
		return f.errAt(at+".do", "a partition needs for: how long the cut holds before it heals, such as 2s")
	}
	return nil
}

func names(set map[string]bool) string {
	var out []string
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
