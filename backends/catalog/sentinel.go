package catalog

import (
	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/redis"
	"github.com/lockcheck/lockcheck/backends/sentinel"
)

func init() {
	Register(Backend{
		Name:       "sentinel",
		Variants:   redis.Variants,
		Failpoints: map[string][]string{redis.SetnxExpire: {redis.FailpointSetnxExpireGap}},
		Nodes: func(p Programs, params map[string]string) []backends.NodeSpec {
			return sentinel.Nodes(p.Path("redis-server"), p.Path("redis-sentinel"), sentinel.SettingsFrom(params))
		},
		ClientAddrs: sentinel.SentinelAddrs,
		Ready:       sentinel.Ready,
		Control:     func(all []backends.Endpoint) any { return sentinel.NewControl(all) },
		Open: func(s Spec, fp backends.Failpoint) (backends.Lock, error) {
			return sentinel.New(redis.Options{Variant: s.Variant, TTL: s.TTL, Fence: s.Fence, Timeout: s.Timeout, Failpoint: fp}, s.Addrs)
		},
	})
}
