// Package catalog names the lock backends lockcheck can test and holds
// everything lockcheck knows of each: its variants, its topology, the
// programs and container images its nodes need, its own flags of run, the
// faults that show what its promise rests on, and how to open a client from
// the few plain fields the harness hands a worker process. Each backend
// registers itself from a file of its own in this package; the CLI and the
// harness only iterate the registry, so a new backend touches its package
// and its file here.
package catalog

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/program"
)

// Spec says which lock a client uses and where the service is.
type Spec struct {
	Backend string        `json:"backend"`
	Variant string        `json:"variant"`
	Addrs   []string      `json:"addrs"`
	TTL     time.Duration `json:"ttl"`
	// Fence asks the backend for its own fence (INCR for Redis).
	Fence   bool          `json:"fence"`
	Timeout time.Duration `json:"timeout"`
	// Source, if set, is the loopback address the client's connections
	// come from: its own link in the process runtime's network.
	Source string `json:"source,omitempty"`
	// Extra carries backend-specific settings (a Sentinel master name, ...).
	Extra map[string]string `json:"extra,omitempty"`
	// Program, if set, is the lock client program the client is (a
	// target ClientTarget resolved): what it is started with and told in
	// init.
	Program *program.Options `json:"program,omitempty"`
}

// Client is what every backend's client is told of the spec, whatever the
// backend (each backend's Options embeds it); fp is hit at the backend's
// failpoints.
func (s Spec) Client(fp backends.Failpoint) backends.Client {
	return backends.Client{TTL: s.TTL, Fence: s.Fence, Timeout: s.Timeout, Source: s.Source, Failpoint: fp}
}

// Programs maps a server program's name (redis-server) to the executable the
// user chose; a missing entry means the name itself, looked up on PATH.
type Programs map[string]string

// Path is the executable for program.
func (p Programs) Path(program string) string {
	if path, ok := p[program]; ok && path != "" {
		return path
	}
	return program
}

// Backend describes one backend for the CLI and the harness.
type Backend struct {
	Name     string
	Variants []string // the first is the correct one
	// Failpoints are the moments inside the backend's own operations a fault
	// can aim at, per variant.
	Failpoints map[string][]string
	// Nodes is the topology: the server processes to start, shaped by the
	// run's params (for example Sentinel's down-after time).
	Nodes func(programs Programs, params map[string]string) []backends.NodeSpec
	// ClientAddrs picks what clients connect to; all nodes by default.
	ClientAddrs func(all []backends.Endpoint) []string
	// Ready, if set, waits until the topology as a whole serves (replicas in
	// sync, sentinels agreed, a leader elected).
	Ready func(ctx context.Context, all []backends.Endpoint) error
	// PrepareAddrs, if set, readies a service lockcheck did not start
	// (--addr) for a run, as Ready does the nodes it started (a sequence
	// the clients draw fences from).
	PrepareAddrs func(ctx context.Context, addrs []string) error
	// Service, if set, gives the nemesis service-level handles (who leads
	// now, ...). The nemesis asks for the methods it needs.
	Service func(all []backends.Endpoint) any
	// Open builds a client.
	Open func(s Spec, fp backends.Failpoint) (backends.Lock, error)

	// Programs are the server executables its nodes run as local
	// processes (none for nodes that are lockcheck itself).
	Programs []backends.Program
	// Flags are its own flags of run and compare, if it has any; several
	// backends may share one set.
	Flags *Flags
	// Signature are the faults that show what its promise rests on: compare
	// runs them for --nemesis signature.
	Signature []string
	// Diskless says its nodes keep nothing on disk: a restarted node always
	// comes back empty, and a run records --wipe as true.
	Diskless bool
	// RequiresResource names, per variant, the --resource it works with
	// only, because it writes the resource inside the lock's own
	// transaction (the postgres backend's xact variant): such a write
	// commits only with the lock, which the checker counts as fencing.
	RequiresResource map[string]string
	// RunNode, if set, runs this process as one of its nodes when the
	// environment says so (a node that is lockcheck itself, such as an etcd
	// member) and reports whether it did; it does not return if it did.
	RunNode func() bool
	// Fences says whether a variant's grants carry a fence of the lock's
	// own when a run asks for one (Spec.Fence, --fence-source lock); nil
	// is none. A fenced run that asks for the lock's fences from a variant
	// that hands out none would have every write refused, and is refused
	// before it starts (harness.Preflight).
	Fences func(variant string) bool
	// LeasesUntilRelease says that a grant without a TTL (Grant.TTL 0) is
	// a lease that lasts until it is released (a session lock); without
	// it, such a grant is refused at the first one (workloads.LeaseError).
	LeasesUntilRelease bool
	// Lease, if set, is the lease the backend really grants when a client
	// asks for ttl, under the run's params, for a backend that rounds or
	// clamps it; see GrantedLease.
	Lease func(ttl time.Duration, params map[string]string) time.Duration
	// Announces says the service tells its clients addresses of its own
	// (a Sentinel hands out the master's): a lock client program dials
	// them directly, past the relays of its slot's links, so a fault on
	// its links could not cut those connections (harness refuses one).
	Announces bool
	// Client, if set, says the backend is a lock client program
	// (ClientTarget) on the servers of a built-in backend.
	Client *ClientProgram
	// ClientSettings are what a lock client program on this backend's
	// servers must know beside their addresses (the Sentinel master's
	// name): init's settings, with the run's params.
	ClientSettings map[string]string
}

// GrantedLease is the lease b really grants for ttl under params: what a
// run waits out and judges its faults against, and what the default
// --pause outlasts. A backend without Lease grants ttl.
func (b Backend) GrantedLease(ttl time.Duration, params map[string]string) time.Duration {
	if b.Lease == nil {
		return ttl
	}
	return b.Lease(ttl, params)
}

// EveryVariant says yes for every variant: a backend whose variants all
// hand out fences.
func EveryVariant(string) bool { return true }

// HandsOutFences says whether variant's grants carry the lock's own fence.
func (b Backend) HandsOutFences(variant string) bool { return b.Fences != nil && b.Fences(variant) }

// Flags are a backend's own flags of run and compare.
type Flags struct {
	// Bind declares the flags on fl and returns what copies their values
	// into a run's settings once the command line is parsed. That is called
	// only for a run on the servers of a backend that owns these flags,
	// whether its lock is the built-in client or a lock client program
	// (Settings.Program); a run on another topology that gives one of them
	// is refused by ApplyFlags, naming the flag.
	Bind func(fl *pflag.FlagSet) (apply func(*Settings) error)
	// Derives names the run params its apply records besides the flags'
	// own (the session timeout a tick yields), which a reproduction's
	// params carry back.
	Derives []string
}

// Settings is what a backend's flags see of a run being configured.
type Settings struct {
	// Topology is the built-in backend whose servers the run starts (the
	// backend itself, or a lock client program's --topology).
	Topology string
	// Program says the run's lock is a lock client program, which opens
	// its own sessions: a setting of how lockcheck's built-in client
	// talks to the servers means nothing to it.
	Program bool
	Faults  []string
	TTL     time.Duration
	// Params are the run's parameters, which its history records; flags add
	// theirs.
	Params map[string]string
	// Changed reports whether the user gave the flag name.
	Changed func(name string) bool
}

// registry holds the backends, written only by Register from init
// functions (and a program of a user's own before it runs the CLI); after
// start-up it is only read. A lock client program is never in it: it is a
// target of its own (ClientTarget).
var registry = map[string]Backend{}

// Register adds a backend; each backend's file calls it from init.
func Register(b Backend) {
	if _, dup := registry[b.Name]; dup {
		panic("catalog: backend registered twice: " + b.Name)
	}
	registry[b.Name] = b
}

// Names lists the backends, sorted: the built-in ones and the locks of a
// program's own.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup finds a backend and checks the variant ("" picks the correct one).
func Lookup(name, variant string) (Backend, string, error) {
	b, ok := registry[name]
	if !ok {
		return Backend{}, "", fmt.Errorf("unknown backend %q (choose one of: %s)", name, strings.Join(Names(), ", "))
	}
	if variant == "" {
		return b, b.Variants[0], nil
	}
	for _, v := range b.Variants {
		if v == variant {
			return b, v, nil
		}
	}
	return b, "", fmt.Errorf("backend %s has no variant %q (choose one of: %s)", name, variant, strings.Join(b.Variants, ", "))
}

// Open builds a lock client from a spec.
func Open(s Spec, fp backends.Failpoint) (backends.Lock, error) {
	if s.Program != nil {
		// A worker process knows the program from the spec alone: a lock
		// client program is in no registry.
		return OpenProgram(s, fp)
	}
	b, _, err := Lookup(s.Backend, s.Variant)
	if err != nil {
		return nil, err
	}
	return b.Open(s, fp)
}

// FlagSets lists every backend's flags once, in the order of Names.
func FlagSets() []*Flags {
	var out []*Flags
	for _, n := range Names() {
		if f := registry[n].Flags; f != nil && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// BoundFlags are every backend's own flags declared on one command's
// flag set (BindFlags), ready to be applied to a run (Apply).
type BoundFlags []boundFlags

type boundFlags struct {
	set   *Flags
	names []string // the flags set declared
	apply func(*Settings) error
}

// BindFlags declares every backend's own flags on fl, once each.
func BindFlags(fl *pflag.FlagSet) BoundFlags {
	var out BoundFlags
	for _, set := range FlagSets() {
		before := map[string]bool{}
		fl.VisitAll(func(f *pflag.Flag) { before[f.Name] = true })
		apply := set.Bind(fl)
		var names []string
		fl.VisitAll(func(f *pflag.Flag) {
			if !before[f.Name] {
				names = append(names, f.Name)
			}
		})
		out = append(out, boundFlags{set: set, names: names, apply: apply})
	}
	return out
}

// Apply copies the flags of the run's topology into s (Settings.Topology
// names it, whether the run's lock is the backend's own client or a lock
// client program on its servers) and refuses, in one line, a flag of
// another topology that the user gave: no flag is silently ignored.
func (bound BoundFlags) Apply(s *Settings) error {
	top, _, err := Lookup(s.Topology, "")
	if err != nil {
		return err
	}
	for _, b := range bound {
		if top.Flags == b.set {
			if err := b.apply(s); err != nil {
				return err
			}
			continue
		}
		for _, name := range b.names {
			if s.Changed(name) {
				owners := strings.Join(b.owners(), " or ")
				return fmt.Errorf("--%s applies to the %s topology only, and this run's is %s: drop it, or run on %s (--backend %s, or --client with --topology %s)",
					name, owners, s.Topology, owners, owners, owners)
			}
		}
	}
	return nil
}

// owners are the backends whose flags these are.
func (b boundFlags) owners() []string {
	var out []string
	for _, n := range Names() {
		if registry[n].Flags == b.set {
			out = append(out, n)
		}
	}
	return out
}

// ParamNames are the run params every backend's own flags record: the
// flags' names, and what they derive (Flags.Derives).
func ParamNames() []string {
	var out []string
	for _, b := range BindFlags(pflag.NewFlagSet("params", pflag.ContinueOnError)) {
		out = append(append(out, b.names...), b.set.Derives...)
	}
	return out
}

// ApplyParams applies a scenario's params to s as a command line giving
// the flags of the same names would (BoundFlags.Apply): the same
// defaults, checks and refusals. A param that names no backend flag is
// the caller's; one a flag derives is derived again.
func ApplyParams(s *Settings, params map[string]string) error {
	fl := pflag.NewFlagSet("params", pflag.ContinueOnError)
	bound := BindFlags(fl)
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if fl.Lookup(k) == nil {
			continue
		}
		if err := fl.Set(k, params[k]); err != nil {
			return fmt.Errorf("%s: %q: %v", k, params[k], err)
		}
	}
	s.Changed = fl.Changed
	return bound.Apply(s)
}

// AllPrograms lists every server program some backend needs, once each.
func AllPrograms() []backends.Program {
	var out []backends.Program
	for _, n := range Names() {
		for _, p := range registry[n].Programs {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// Images lists every container image some backend's nodes run in, once
// each, as the default topologies declare them.
func Images() []*backends.Image {
	var out []*backends.Image
	for _, n := range Names() {
		for _, spec := range registry[n].Nodes(Programs{}, map[string]string{}) {
			if spec.Image != nil && !slices.Contains(out, spec.Image) {
				out = append(out, spec.Image)
			}
		}
	}
	return out
}

// RunNodeFromEnv runs this process as a backend's node if its environment
// says so, and reports whether it did.
func RunNodeFromEnv() bool {
	for _, n := range Names() {
		if run := registry[n].RunNode; run != nil && run() {
			return true
		}
	}
	return false
}

// Addrs returns the addresses clients of b connect to.
func (b Backend) Addrs(all []backends.Endpoint) []string {
	if b.ClientAddrs != nil {
		return b.ClientAddrs(all)
	}
	return backends.Addrs(all)
}
