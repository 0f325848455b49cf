package catalog

import (
	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/redlock"
)

func init() {
	Register(fiveMasters("redlock", "correct", func(o redlock.Options) (backends.Lock, error) { return redlock.New(o) }))
}

// fiveMasters is a backend over Redlock's five independent masters: our own
// Redlock client and redsync share the topology and the settings.
func fiveMasters(name, variant string, open func(redlock.Options) (backends.Lock, error)) Backend {
	return Backend{
		Name:     name,
		Variants: []string{variant},
		Nodes: func(p Programs, _ map[string]string) []backends.NodeSpec {
			return redlock.Nodes(p.Path("redis-server"))
		},
		Control: func(all []backends.Endpoint) any { return redlock.NewControl(all) },
		Open: func(s Spec, _ backends.Failpoint) (backends.Lock, error) {
			opts, err := redlockOptions(s)
			if err != nil {
				return nil, err
			}
			return open(opts)
		},
	}
}

// redlockOptions reads a Redlock client's settings from a spec; redsync
// shares them.
func redlockOptions(s Spec) (redlock.Options, error) {
	return redlock.ParseParams(s.Extra, redlock.Options{
		Nodes: redlock.NamedNodes(s.Addrs), TTL: s.TTL, Fence: s.Fence,
	})
}
