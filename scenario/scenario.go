// Package scenario reads incident scenarios: a backend, a workload, an exact
// timeline of faults and the outcome the checks must show. lockcheck ships a
// catalogue of them, one per failure its seed articles describe, and runs
// them as its regression suite.
package scenario

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/program"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/nemesis"
)

// File is one scenario as written in YAML.
type File struct {
	Name    string `yaml:"name"`
	Title   string `yaml:"title,omitempty"`
	Source  string `yaml:"source,omitempty"`
	Explain string `yaml:"explain,omitempty"`
	Backend string `yaml:"backend"`
	Variant string `yaml:"variant,omitempty"`
	// Client, if set, is the lock client program the scenario tests
	// (docs/clients.md), as run's --client: backend is then its name.
	Client      *Client `yaml:"client,omitempty"`
	Workload    string  `yaml:"workload,omitempty"`
	FenceSource string  `yaml:"fence_source,omitempty"`
	// Resource is the protected resource: memory (the default) or
	// postgres, as run's --resource.
	Resource  string   `yaml:"resource,omitempty"`
	TTL       Duration `yaml:"ttl"`
	Clients   int      `yaml:"clients"`
	Think     string   `yaml:"think,omitempty"`
	Watchdog  bool     `yaml:"watchdog,omitempty"`
	TimeLimit Duration `yaml:"time_limit"`
	// OpTimeout bounds each lock operation, as run's --op-timeout: a
	// holder cut off past its session must still be waiting for its
	// release when the cut heals to hear its library say it lost the lock.
	OpTimeout Duration          `yaml:"op_timeout,omitempty"`
	Params    map[string]string `yaml:"params,omitempty"`
	Timeline  []Step            `yaml:"timeline,omitempty"`
	Expect    Expect            `yaml:"expect"`

	lines map[string]int // where each timeline step and expectation starts
	// target is the lock the scenario tests, resolved by validate: a
	// backend of the catalog, or its client program on its topology.
	target catalog.Backend
	// settings are the params the backend flags of the scenario's
	// topology record for its params (catalog.ApplyParams): defaulted,
	// checked and derived as run's flags would be.
	settings map[string]string
	// file is the file the scenario was read from (ReadFile), which
	// lockcheck scenario run --file runs; a shipped one runs by its name.
	file string
}

// Client is a lock client program, as run's --client, --topology and
// --client-name say it.
type Client struct {
	Command  string `yaml:"command"`
	Topology string `yaml:"topology,omitempty"`
	Name     string `yaml:"name,omitempty"`
	// InitTimeout is run's --client-init-timeout: how long the program
	// may take to answer init (0: the default).
	InitTimeout Duration `yaml:"init_timeout,omitempty"`
}

// resolve finds the lock the scenario tests: its backend, or its client
// program on its topology (never written into the catalog).
func (f *File) resolve() error {
	if f.Client == nil {
		b, variant, err := catalog.Lookup(f.Backend, f.Variant)
		if err != nil {
			return f.errAt("backend", "%v", err)
		}
		f.target, f.Variant = b, variant
		return nil
	}
	argv, err := program.SplitCommand(f.Client.Command)
	if err != nil {
		return f.errAt("client.command", "%v", err)
	}
	if f.Client.InitTimeout < 0 {
		return f.errAt("client.init_timeout", "%s is negative: give how long the program may take to answer init, such as 30s", f.Client.InitTimeout.D())
	}
	b, err := catalog.ClientTarget(f.Client.Name, catalog.ClientProgram{Command: argv, Topology: f.Client.Topology, InitTimeout: f.Client.InitTimeout.D()})
	if err != nil {
		return f.errAt("client", "%v", err)
	}
	if f.Backend != "" && f.Backend != b.Name {
		return f.errAt("backend", "%q, but the client program is named %q: drop backend, or name the client with client.name", f.Backend, b.Name)
	}
	if f.Variant != "" && f.Variant != catalog.ClientVariant {
		return f.errAt("variant", "%q: a client program has no variants; drop variant", f.Variant)
	}
	f.target, f.Backend, f.Variant = b, b.Name, catalog.ClientVariant
	return nil
}

// validateParams refuses a param no run knows (naming the nearest one
// that exists: a misspelt pool-mode is not silently session pooling) and
// applies the backend's own through its flags, as run does.
func (f *File) validateParams() error {
	known := harness.ParamNames()
	for _, k := range slices.Sorted(maps.Keys(f.Params)) {
		if !slices.Contains(known, k) {
			return f.errAt("params."+k, "unknown param %q%s", k, nearest(k, known))
		}
	}
	s := catalog.Settings{Topology: f.target.Topology(), Program: f.target.Client != nil, Faults: faultNames(f.Timeline), TTL: f.TTL.D(), Params: map[string]string{}}
	if err := catalog.ApplyParams(&s, f.Params); err != nil {
		return f.errAt("params", "%v", err)
	}
	f.settings = s.Params
	return nil
}

// faultNames are the whole faults a timeline runs.
func faultNames(timeline []Step) []string {
	var out []string
	for _, s := range timeline {
		if s.Do == "fault" {
			out = append(out, s.Fault)
		}
	}
	return out
}

// nearest says which of names is closest to name, as "; did you mean
// \"pool-mode\"? (known: ...)" when one is a near miss.
func nearest(name string, names []string) string {
	best, dist := "", len(name)/2+2
	for _, n := range names {
		if d := editDistance(name, n); d < dist {
			best, dist = n, d
		}
	}
	if best == "" {
		return " (known params: " + strings.Join(names, ", ") + ")"
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// SetClientInitTimeout gives the scenario's client program d to answer
// init (scenario run's --client-init-timeout), as client.init_timeout
// does; it reports whether the scenario has a client program.
func (f *File) SetClientInitTimeout(d time.Duration) (bool, error) {
	if f.Client == nil {
		return false, nil
	}
	f.Client.InitTimeout = Duration(d)
	return true, f.resolve()
}

// Step is one action of the timeline.
type Step struct {
	At     Duration `yaml:"at"`
	When   *When    `yaml:"when,omitempty,flow"`
	Do     string   `yaml:"do"`
	Target string   `yaml:"target,omitempty"`
	For    Duration `yaml:"for,omitempty"`
	Offset Duration `yaml:"offset,omitempty"`
	Wipe   bool     `yaml:"wipe,omitempty"`
	Fault  string   `yaml:"fault,omitempty"`
	// Links, for a partition, are the nodes and clients cut from Target
	// for For.
	Links []string `yaml:"links,omitempty,flow"`
}

// When waits for a client to reach a moment: "acquired", "bare-majority"
// (it holds the lock on a bare majority of the nodes, Node among them if
// given), "failover-grant" (it holds the lock granted within a lease after
// the service's latest failover), "empty-release" (its release deleted
// nothing) or a failpoint such as before-write (right after its lease
// check). Client may be "any" for bare-majority and failover-grant.
type When struct {
	Client  string `yaml:"client"`
	Reaches string `yaml:"reaches"`
	Node    string `yaml:"node,omitempty"`
}

// Expect is the outcome the scenario must show.
type Expect struct {
	// Verdict is true, false or unknown, or "not true" (false or unknown:
	// a run that must never pass, whichever way the race of the day
	// breaks it); empty means any.
	Verdict string `yaml:"verdict,omitempty"`
	// Fail and Hold list checks that must fail and must hold.
	Fail []string `yaml:"fail,omitempty,flow"`
	Hold []string `yaml:"hold,omitempty,flow"`
	// Counts constrain numbers of results.json's checks, as
	// "resource.lost_updates": ">= 1".
	Counts map[string]string `yaml:"counts,omitempty"`
	// Landed is how many timeline steps must land, a condition such as
	// ">= 1"; empty means every one, and that every one ran. A run's
	// reproduction replays all the faults in force around its anomalies,
	// and reproduces the failure when the same checks fail, whichever of
	// its faults met their moment this time.
	Landed string `yaml:"landed,omitempty"`
}

// Duration is a time.Duration written as "900ms" or "+2s".
type Duration time.Duration

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: expected a duration such as 900ms or +2s, got %s", n.Line, kindName(n.Kind))
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration such as 900ms or +2s", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as UnmarshalYAML reads it.
func (d Duration) MarshalYAML() (any, error) { return d.D().String(), nil }

// D is the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Checks a scenario can expect to fail or hold.
var Checks = checker.Keys()

// kindName names a YAML node kind as an error shows what it got.
func kindName(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	}
	return "a document"
}

// Parse reads and validates a scenario. Errors name the file's line and the
// field at fault.
func Parse(name string, data []byte) (*File, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %s", name, yamlError(err, nil))
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: the file is empty: a scenario is a YAML mapping with name, backend, timeline and expect", name)
	}
	if root := doc.Content[0]; root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: line %d: expected a mapping with name, backend, timeline and expect, got %s", name, root.Line, kindName(root.Kind))
	}
	lines := lineIndex(&doc)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // a misspelled field is an error, not a silent default
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %s", name, yamlError(err, lines))
	}
	f.lines = lines
	f.defaults()
	if err := f.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &f, nil
}

// ReadFile reads and validates the scenario in the file at path.
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	if f.file, err = filepath.Abs(path); err != nil {
		return nil, err
	}
	return f, nil
}

// CommandLine is the lockcheck command line that runs the scenario again.
func (f *File) CommandLine() []string {
	if f.file != "" {
		return []string{"lockcheck", "scenario", "run", "--file", f.file}
	}
	return []string{"lockcheck", "scenario", "run", f.Name}
}

// Marshal writes the scenario as YAML that Parse reads back, leaving out
// fields at their zero value (a reproduction a run wrote, a shrunk one).
func (f *File) Marshal() ([]byte, error) { return yaml.Marshal(f) }

// defaults fills in what the file leaves out with the run's defaults
// (harness.Defaults), so that validate sees the values the run will use.
func (f *File) defaults() {
	d := harness.Defaults
	f.Workload = cmp.Or(f.Workload, d.Run.Workload)
	f.FenceSource = cmp.Or(f.FenceSource, d.Run.FenceSource)
	f.TTL = cmp.Or(f.TTL, Duration(d.TTL))
	f.Clients = cmp.Or(f.Clients, d.Run.Clients)
	f.Think = cmp.Or(f.Think, d.Think)
	f.TimeLimit = cmp.Or(f.TimeLimit, Duration(d.Limit))
}

// Actions turns the timeline into the nemesis's script.
func (f *File) Actions() []nemesis.Action {
	out := make([]nemesis.Action, 0, len(f.Timeline))
	for _, s := range f.Timeline {
		a := nemesis.Action{At: s.At.D(), Do: s.Do, Target: s.Target, For: s.For.D(), Offset: s.Offset.D(), Wipe: s.Wipe, Fault: s.Fault, Links: s.Links}
		if s.When != nil {
			a.When = &nemesis.Trigger{Client: s.When.Client, Reaches: s.When.Reaches, Node: s.When.Node}
		}
		out = append(out, a)
	}
	return out
}
