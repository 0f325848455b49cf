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
	// asked it (DeclareClient): whether it hands out fences, its
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

// RegisterClient adds the client program c to the registry as backend
// name: the topology's nodes, readiness, service handle, programs and
// faults, the client's own lock. Until the program declared itself
// (DeclareClient), it is taken to hand out fences, so that a run's
// preflight waits for its word.
func RegisterClient(name string, c ClientProgram) error {
	if len(c.Command) == 0 {
		return fmt.Errorf("--client: no command")
	}
	top, _, err := Lookup(c.Topology, "")
	if err != nil {
		return fmt.Errorf("--topology: %w", err)
	}
	if top.Client != nil {
		return fmt.Errorf("--topology %s is a client program: name a built-in backend", c.Topology)
	}
	if _, taken := registry[name]; taken {
		return fmt.Errorf("--client-name %s: a backend of that name exists; choose another", name)
	}
	c.Settings = top.ClientSettings
	client := &c
	Register(Backend{
		Name: name, Variants: []string{ClientVariant}, Failpoints: map[string][]string{},
		Nodes: top.Nodes, ClientAddrs: top.ClientAddrs, Ready: top.Ready, PrepareAddrs: top.PrepareAddrs,
		Service: top.Service, Programs: top.Programs, Signature: top.Signature, Diskless: top.Diskless,
		Lease: top.Lease, LeasesUntilRelease: top.LeasesUntilRelease, ClientSettings: top.ClientSettings,
		Fences: func(string) bool { return client.Declared == nil || client.Declared.Supports.Fence },
		Open: func(s Spec, fp backends.Failpoint) (backends.Lock, error) {
			if s.Program == nil {
				o := client.Options(name)
				o.Slot = "lockcheck"
				s.Program = &o
			}
			return OpenProgram(s, fp)
		},
		Client: client,
	})
	return nil
}

// Options are what every start of the program, tested as backend, is
// told whoever starts it; the caller adds the slot, process and log.
func (c *ClientProgram) Options(backend string) program.Options {
	return program.Options{Command: c.Command, Backend: backend, Topology: c.Topology, InitTimeout: c.InitTimeout, Settings: c.Settings}
}

// UseClient registers the client program argv as backend name (default
// ClientName) on topology (default redis), unless the same program is
// registered under that name already (compare and scenarios configure
// each run), and returns the name.
func UseClient(argv []string, name, topology string, initTimeout time.Duration) (string, error) {
	if len(argv) == 0 {
		return "", fmt.Errorf("--client: no program")
	}
	if name == "" {
		name = ClientName(argv)
	}
	if topology == "" {
		topology = "redis"
	}
	if b, ok := registry[name]; ok && b.Client != nil && slices.Equal(b.Client.Command, argv) && b.Client.Topology == topology {
		return name, nil
	}
	return name, RegisterClient(name, ClientProgram{Command: argv, Topology: topology, InitTimeout: initTimeout})
}

// DeclareClient records what client program backend name said of itself:
// its fences and failpoints are what the run's checks go by from now on.
func DeclareClient(name string, d program.Declaration) {
	b := registry[name]
	if b.Client == nil {
		return
	}
	b.Client.Declared = &d
	b.Failpoints[ClientVariant] = slices.Clone(d.Failpoints)
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
