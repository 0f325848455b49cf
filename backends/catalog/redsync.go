package catalog

import (
	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/redlock"
	"github.com/lockcheck/lockcheck/backends/redsync"
)

func init() {
	Register(Backend{
		Name:     "redsync",
		Variants: []string{"default"},
		Nodes: func(p Programs, _ map[string]string) []backends.NodeSpec {
			return redlock.Nodes(p.Path("redis-server"))
		},
		Control: func(all []backends.Endpoint) any { return redlock.NewControl(all) },
		Open: func(s Spec, _ backends.Failpoint) (backends.Lock, error) {
			opts, err := redlockOptions(s)
			if err != nil {
				return nil, err
			}
			return redsync.New(opts)
		},
	})
}
