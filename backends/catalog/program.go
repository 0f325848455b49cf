package catalog

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/program"
)

// ClientVariant is the one variant of a lock client program: the program
// is what it is.
const ClientVariant = "default"

// DefaultTopology is the topology of a lock client program whose run
// names none.
const DefaultTopology = "redis"

// ClientProgram is a lock client that is a program of its own, speaking
// the client protocol (docs/clients.md), tested on the servers of a
// built-in backend.
type ClientProgram struct {
	// Command is the program and its arguments.
	Command []string
	// Topology names the built-in backend whose servers the program
	// talks to.
	Topology string
	// Declared is what the program said of itself in init_ok, once a run
	// asked it (Backend.Declare): whether it hands out fences, its
	// failpoints, its library.
	Declared *program.Declaration
	// InitTimeout bounds the wait for its init_ok (0: the default).
	InitTimeout time.Duration
	// Settings are what the topology tells its client programs
	// (Backend.ClientSettings).
	Settings map[string]string
}

// ClientName is the name a client program is tested under when the user
// gives none: its script's base name without extension for an
// interpreter's command (python3 my_lock.py: my_lock), else the program's.
func ClientName(command []string) string {
	name := filepath.Base(command[0])
	for _, arg := range command[1:] {
		if !strings.HasPrefix(arg, "-") {
			name = filepath.Base(arg)
			break
		}
	}
	return strings.TrimSuffix(name, filepath.Ext(name))
}

// ClientTarget is the client program c tested as backend name (default
// ClientName) on the servers of c.Topology (default DefaultTopology): the
// topology's nodes, readiness, service handle, programs, flags and
// faults, the client's own lock. It is a value of its own, never written
// into the registry. Until the program declared itself (Declare), it is
// taken to hand out fences, so that a run's preflight waits for its word.
func ClientTarget(name string, c ClientProgram) (Backend, error) {
	if len(c.Command) == 0 {
		return Backend{}, fmt.Errorf("--client: no program")
	}
	if name == "" {
		name = ClientName(c.Command)
	}
	if c.Topology == "" {
		c.Topology = DefaultTopology
	}
	top, _, err := Lookup(c.Topology, "")
	if err != nil {
		return Backend{}, fmt.Errorf("--topology: %w", err)
	}
	if _, taken := registry[name]; taken {
		return Backend{}, fmt.Errorf("--client-name %s: a backend of that name exists; choose another", name)
	}
	c.Command = slices.Clone(c.Command)
	c.Settings = top.ClientSettings
	return Backend{
		Name: name, Variants: []string{ClientVariant}, Failpoints: map[string][]string{},
		Nodes: top.Nodes, ClientAddrs: top.ClientAddrs, Ready: top.Ready, PrepareAddrs: top.PrepareAddrs,
		Service: top.Service, Programs: top.Programs, Flags: top.Flags, Signature: top.Signature, Diskless: top.Diskless,
		Lease: top.Lease, LeasesUntilRelease: top.LeasesUntilRelease, ClientSettings: top.ClientSettings, Announces: top.Announces,
		Fences: func(string) bool { return true },
		Open: func(s Spec, fp backends.Failpoint) (backends.Lock, error) {
			if s.Program == nil {
				o := c.Options(name)
				o.Slot = "lockcheck"
				s.Program = &o
			}
			return OpenProgram(s, fp)
		},
		Client: &c,
	}, nil
}

// Topology is the built-in backend whose servers b runs on: b itself, or
// a lock client program's topology.
func (b Backend) Topology() string {
	if b.Client != nil {
		return b.Client.Topology
	}
	return b.Name
}

// Declare is the lock client program b as it declared itself in init_ok:
// its fences and failpoints are what the run's checks go by from then
// on. It returns a copy; b, and the registry, are unchanged.
func (b Backend) Declare(d program.Declaration) Backend {
	if b.Client == nil {
		return b
	}
	c := *b.Client
	c.Declared = &d
	b.Client = &c
	b.Failpoints = map[string][]string{ClientVariant: slices.Clone(d.Failpoints)}
	fences := d.Supports.Fence
	b.Fences = func(string) bool { return fences }
	return b
}

// Resolve finds what a run tests: the backend name (with variant, ""
// for its correct one) from the registry, or, when client is set, that
// lock client program on its topology (ClientTarget, under name if
// given). It returns the target and its variant.
func Resolve(name, variant string, client *ClientProgram) (Backend, string, error) {
	if client == nil {
		return Lookup(name, variant)
	}
	b, err := ClientTarget(name, *client)
	return b, ClientVariant, err
}

// Options are what every start of the program, tested as backend, is
// told whoever starts it; the caller adds the slot, process and log.
func (c *ClientProgram) Options(backend string) program.Options {
	return program.Options{Command: c.Command, Backend: backend, Topology: c.Topology, InitTimeout: c.InitTimeout, Settings: c.Settings}
}

// OpenProgram starts the client program s.Program for s.
func OpenProgram(s Spec, fp backends.Failpoint) (*program.Lock, error) {
	o := *s.Program
	o.Client = s.Client(fp)
	o.Addrs = s.Addrs
	settings := maps.Clone(s.Extra)
	if settings == nil {
		settings = map[string]string{}
	}
	maps.Copy(settings, o.Settings)
	o.Settings = settings
	return program.Open(o)
}
