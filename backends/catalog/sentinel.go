package catalog

import (
	"maps"

	"github.com/spf13/pflag"

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
			return sentinel.Nodes(p.Path(redis.Server.Name), p.Path(sentinel.Program.Name), sentinel.SettingsFrom(params))
		},
		ClientAddrs: sentinel.SentinelAddrs,
		Ready:       sentinel.Ready,
		Service:     func(all []backends.Endpoint) any { return sentinel.NewService(all) },
		Open: func(s Spec, fp backends.Failpoint) (backends.Lock, error) {
			return sentinel.New(redis.Options{Client: s.Client(fp), Variant: s.Variant}, s.Addrs)
		},
		Fences:    EveryVariant, // INCR of a fence counter beside the key
		Programs:  []backends.Program{redis.Server, sentinel.Program},
		Flags:     &Flags{Bind: sentinelFlags},
		Signature: []string{"failover-lost-lock"},
		// A lock client program asks the sentinels for the master by name.
		ClientSettings: map[string]string{"sentinel_master": sentinel.MasterName},
		Announces:      true,
	})
}

func sentinelFlags(fl *pflag.FlagSet) func(*Settings) error {
	def := sentinel.DefaultSettings()
	downAfter := fl.Duration("down-after", def.DownAfter, "sentinel: how long the master must not answer before a sentinel considers it down (down-after-milliseconds); at 1s, the sentinels' ping period, a just-promoted master is sometimes failed over again a second later, 1500ms avoids that")
	failoverTimeout := fl.Duration("failover-timeout", def.FailoverTimeout, "sentinel: the sentinels' failover-timeout; a sentinel starts no new failover within twice this time of the last")
	minReplicas := fl.Int("min-replicas-to-write", def.MinReplicasToWrite, "sentinel: a master refuses writes (NOREPLICAS) unless this many replicas are connected and current; 1 makes failover-lost-lock's grant fail instead of granting twice (0: off)")
	maxLag := fl.Duration("min-replicas-max-lag", def.MinReplicasMaxLag, "sentinel: how far behind, in whole seconds, a replica may be and still count for --min-replicas-to-write")
	return func(r *Settings) error {
		s := sentinel.Settings{DownAfter: *downAfter, FailoverTimeout: *failoverTimeout, MinReplicasToWrite: *minReplicas, MinReplicasMaxLag: *maxLag}
		if err := s.Validate(); err != nil {
			return err
		}
		maps.Copy(r.Params, s.Params())
		return nil
	}
}
