package catalog

import (
	"fmt"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/redis"
)

// DefaultBackend is the backend a run tests unless told otherwise: redis,
// or in a program of a user's own the first lock it registered (package
// lockcheck).
var DefaultBackend = "redis"

func init() {
	Register(Backend{
		Name:       "redis",
		Variants:   redis.Variants,
		Failpoints: map[string][]string{redis.SetnxExpire: {redis.FailpointSetnxExpireGap}},
		Nodes: func(p Programs, _ map[string]string) []backends.NodeSpec {
			return []backends.NodeSpec{redis.Node("redis-0", p.Path(redis.Server.Name))}
		},
		Open: func(s Spec, fp backends.Failpoint) (backends.Lock, error) {
			if len(s.Addrs) != 1 {
				return nil, fmt.Errorf("redis backend needs one address, got %d", len(s.Addrs))
			}
			return redis.New(redis.Options{Client: s.Client(fp), Addr: s.Addrs[0], Variant: s.Variant})
		},
		Fences:    EveryVariant, // INCR of a fence counter beside the key
		Programs:  []backends.Program{redis.Server},
		Signature: []string{"pause-holder"},
	})
}
