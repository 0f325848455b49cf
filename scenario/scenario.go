// Package scenario reads incident scenarios: a backend, a workload, an exact
// timeline of faults and the outcome the checks must show. lockcheck ships a
// catalogue of them, one per failure its seed articles describe, and runs
// them as its regression suite.
package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/nemesis"
	"github.com/lockcheck/lockcheck/workloads"
)

// File is one scenario as written in YAML.
type File struct {
	Name        string `yaml:"name"`
	Title       string `yaml:"title"`
	Source      string `yaml:"source"`
	Explain     string `yaml:"explain"`
	Backend     string `yaml:"backend"`
	Variant     string `yaml:"variant"`
	Workload    string `yaml:"workload"`
	FenceSource string `yaml:"fence_source"`
	// Resource is the protected resource: memory (the default) or
	// postgres, as run's --resource.
	Resource  string            `yaml:"resource"`
	TTL       Duration          `yaml:"ttl"`
	Clients   int               `yaml:"clients"`
	Think     string            `yaml:"think"`
	Watchdog  bool              `yaml:"watchdog"`
	TimeLimit Duration          `yaml:"time_limit"`
	Params    map[string]string `yaml:"params"`
	Timeline  []Step            `yaml:"timeline"`
	Expect    Expect            `yaml:"expect"`

	lines map[string]int // where each timeline step and expectation starts
}

// Step is one action of the timeline.
type Step struct {
	At     Duration `yaml:"at"`
	When   *When    `yaml:"when"`
	Do     string   `yaml:"do"`
	Target string   `yaml:"target"`
	For    Duration `yaml:"for"`
	Offset Duration `yaml:"offset"`
	Wipe   bool     `yaml:"wipe"`
	Fault  string   `yaml:"fault"`
}

// When waits for a client to reach a moment: "acquired" or a failpoint
// such as before-write (right after its lease check).
type When struct {
	Client  string `yaml:"client"`
	Reaches string `yaml:"reaches"`
}

// Expect is the outcome the scenario must show.
type Expect struct {
	// Verdict is true, false or unknown; empty means any.
	Verdict string `yaml:"verdict"`
	// Fail and Hold list checks that must fail and must hold.
	Fail []string `yaml:"fail"`
	Hold []string `yaml:"hold"`
	// Counts constrain numbers of results.json's checks, as
	// "resource.lost_updates": ">= 1".
	Counts map[string]string `yaml:"counts"`
}

// Duration is a time.Duration written as "900ms" or "+2s".
type Duration time.Duration

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration such as 900ms or +2s", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// D is the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Checks a scenario can expect to fail or hold.
var Checks = []string{"lease_safety", "double_ownership", "resource", "fencing", "linearizability", "liveness"}

// Parse reads and validates a scenario. Errors name the file's line and the
// field at fault.
func Parse(name string, data []byte) (*File, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // a misspelled field is an error, not a silent default
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %s", name, strings.TrimPrefix(strings.ReplaceAll(err.Error(), "\n ", ""), "yaml: "))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	f.lines = lineIndex(&doc)
	f.defaults()
	if err := f.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &f, nil
}

// lineIndex records the line of every top-level field and of every
// timeline step ("timeline[2]") and its fields ("timeline[2].target").
func lineIndex(doc *yaml.Node) map[string]int {
	lines := map[string]int{}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return lines
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i], root.Content[i+1]
		lines[key.Value] = key.Line
		if key.Value != "timeline" || val.Kind != yaml.SequenceNode {
			continue
		}
		for j, step := range val.Content {
			prefix := fmt.Sprintf("timeline[%d]", j)
			lines[prefix] = step.Line
			for k := 0; k+1 < len(step.Content); k += 2 {
				lines[prefix+"."+step.Content[k].Value] = step.Content[k].Line
			}
		}
	}
	return lines
}

func (f *File) defaults() {
	if f.Workload == "" {
		f.Workload = workloads.Unfenced
	}
	if f.FenceSource == "" {
		f.FenceSource = "lock"
	}
	if f.TTL == 0 {
		f.TTL = Duration(500 * time.Millisecond)
	}
	if f.Clients == 0 {
		f.Clients = 3
	}
	if f.Think == "" {
		f.Think = "20ms"
	}
	if f.TimeLimit == 0 {
		f.TimeLimit = Duration(5 * time.Second)
	}
}

// errAt names the line of a field.
func (f *File) errAt(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if line, ok := f.lines[field]; ok {
		return fmt.Errorf("line %d: %s: %s", line, lastPart(field), msg)
	}
	return fmt.Errorf("%s: %s", field, msg)
}

func lastPart(field string) string {
	if i := strings.LastIndexByte(field, '.'); i >= 0 {
		return field[i+1:]
	}
	return field
}

func (f *File) validate() error {
	if f.Name == "" {
		return errors.New(`missing "name"`)
	}
	b, variant, err := catalog.Lookup(f.Backend, f.Variant)
	if err != nil {
		return f.errAt("backend", "%v", err)
	}
	f.Variant = variant
	if f.Workload != workloads.Fenced && f.Workload != workloads.Unfenced {
		return f.errAt("workload", "%q is not fenced or unfenced", f.Workload)
	}
	if _, err := workloads.ParseRange(f.Think); err != nil {
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
	moments := append([]string{nemesis.MomentAcquired, workloads.FailpointBeforeWrite, workloads.FailpointBeforeLeaseCheck, workloads.FailpointBeforeAcquire}, b.Failpoints[variant]...)
	for i, s := range f.Timeline {
		at := fmt.Sprintf("timeline[%d]", i)
		if !slices.Contains(nemesis.ScriptVerbs, s.Do) {
			return f.errAt(at+".do", "unknown action %q (choose one of: %s)", s.Do, strings.Join(nemesis.ScriptVerbs, ", "))
		}
		if s.When != nil {
			if !clients[s.When.Client] {
				return f.errAt(at+".when", "unknown client %q (this scenario has %s)", s.When.Client, names(clients))
			}
			if !slices.Contains(moments, s.When.Reaches) {
				return f.errAt(at+".when", "unknown moment %q (choose one of: %s)", s.When.Reaches, strings.Join(moments, ", "))
			}
		}
		if s.Do == "fault" {
			if _, ok := nemesis.Faults[s.Fault]; !ok {
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
	}
	for _, c := range append(slices.Clone(f.Expect.Fail), f.Expect.Hold...) {
		if !slices.Contains(Checks, c) {
			return f.errAt("expect", "unknown check %q (choose one of: %s)", c, strings.Join(Checks, ", "))
		}
	}
	for path, cond := range f.Expect.Counts {
		if _, _, err := parseCondition(cond); err != nil {
			return f.errAt("expect", "%s: %v", path, err)
		}
	}
	switch f.Expect.Verdict {
	case "", "true", "false", "unknown":
	default:
		return f.errAt("expect", "verdict %q is not true, false or unknown", f.Expect.Verdict)
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

// Actions turns the timeline into the nemesis's script.
func (f *File) Actions() []nemesis.Action {
	out := make([]nemesis.Action, 0, len(f.Timeline))
	for _, s := range f.Timeline {
		a := nemesis.Action{At: s.At.D(), Do: s.Do, Target: s.Target, For: s.For.D(), Offset: s.Offset.D(), Wipe: s.Wipe, Fault: s.Fault}
		if s.When != nil {
			a.When = &nemesis.Trigger{Client: s.When.Client, Reaches: s.When.Reaches}
		}
		out = append(out, a)
	}
	return out
}
