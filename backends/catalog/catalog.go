// Package catalog names the lock backends lockcheck can test and opens them
// from plain configuration, so a worker process can build its client from
// the few fields the harness hands it.
package catalog

import (
	"fmt"
	"strings"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/redis"
)

// Spec says which lock a client uses and where its nodes are.
type Spec struct {
	Backend string        `json:"backend"`
	Variant string        `json:"variant"`
	Addrs   []string      `json:"addrs"`
	TTL     time.Duration `json:"ttl"`
	// Fence asks the backend for its own fence (INCR for Redis).
	Fence   bool          `json:"fence"`
	Timeout time.Duration `json:"timeout"`
}

// Backend describes one backend for the CLI and the harness.
type Backend struct {
	Name     string
	Variants []string
	// Failpoints are the moments inside the backend's own operations a fault
	// can aim at.
	Failpoints map[string][]string // variant -> failpoints
	// Nodes is the topology: the server processes to start.
	Nodes func(programs Programs) []backends.NodeSpec
}

// Programs are the server executables the user chose.
type Programs struct {
	RedisServer string
}

var all = []Backend{
	{
		Name:       "redis",
		Variants:   redis.Variants,
		Failpoints: map[string][]string{redis.SetnxExpire: {redis.FailpointSetnxExpireGap}},
		Nodes: func(p Programs) []backends.NodeSpec {
			return []backends.NodeSpec{redis.Node("redis-0", p.RedisServer)}
		},
	},
}

// Names lists the backends.
func Names() []string {
	names := make([]string, len(all))
	for i, b := range all {
		names[i] = b.Name
	}
	return names
}

// Lookup finds a backend and checks the variant ("" picks the first).
func Lookup(name, variant string) (Backend, string, error) {
	for _, b := range all {
		if b.Name != name {
			continue
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
	return Backend{}, "", fmt.Errorf("unknown backend %q (choose one of: %s)", name, strings.Join(Names(), ", "))
}

// Open builds a lock client from a spec.
func Open(s Spec, fp backends.Failpoint) (backends.Lock, error) {
	switch s.Backend {
	case "redis":
		if len(s.Addrs) != 1 {
			return nil, fmt.Errorf("redis backend needs one address, got %d", len(s.Addrs))
		}
		return redis.New(redis.Options{Addr: s.Addrs[0], Variant: s.Variant, TTL: s.TTL, Fence: s.Fence, Timeout: s.Timeout, Failpoint: fp})
	}
	_, _, err := Lookup(s.Backend, s.Variant)
	return nil, err
}
