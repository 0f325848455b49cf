// Package catalog names the lock backends lockcheck can test: for each, its
// variants, its topology, and how to open a client from the few plain fields
// the harness hands a worker process. Each backend registers itself from a
// file of its own in this package.
package catalog

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lockcheck/lockcheck/backends"
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
	// Extra carries backend-specific settings (a Sentinel master name, ...).
	Extra map[string]string `json:"extra,omitempty"`
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
	// Control, if set, gives the nemesis service-level handles (who leads
	// now, ...). The nemesis asks for the methods it needs.
	Control func(all []backends.Endpoint) any
	// Open builds a client.
	Open func(s Spec, fp backends.Failpoint) (backends.Lock, error)
}

var registry = map[string]Backend{}

// Register adds a backend; each backend's file calls it from init.
func Register(b Backend) {
	if _, dup := registry[b.Name]; dup {
		panic("catalog: backend registered twice: " + b.Name)
	}
	registry[b.Name] = b
}

// Names lists the backends, sorted.
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
	b, _, err := Lookup(s.Backend, s.Variant)
	if err != nil {
		return nil, err
	}
	return b.Open(s, fp)
}

// Addrs returns the addresses clients of b connect to.
func (b Backend) Addrs(all []backends.Endpoint) []string {
	if b.ClientAddrs != nil {
		return b.ClientAddrs(all)
	}
	return backends.Addrs(all)
}
