package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/backends/sentinel"
	"github.com/lockcheck/lockcheck/harness"
)

// sentinelSwitchTime is how long a Sentinel failover takes with the default
// --down-after: 2-3 s from losing the master to +switch-master.
const sentinelSwitchTime = 3 * time.Second

func init() {
	runFlagHooks = append(runFlagHooks, func(fl *pflag.FlagSet) func(*harness.Config) error {
		def := sentinel.DefaultSettings()
		downAfter := fl.Duration("down-after", def.DownAfter, "sentinel: how long the master must not answer before a sentinel considers it down (down-after-milliseconds); at 1s, the sentinels' ping period, a just-promoted master is sometimes failed over again a second later, 1500ms avoids that")
		failoverTimeout := fl.Duration("failover-timeout", def.FailoverTimeout, "sentinel: the sentinels' failover-timeout; a sentinel starts no new failover within twice this time of the last")
		minReplicas := fl.Int("min-replicas-to-write", def.MinReplicasToWrite, "sentinel: a master refuses writes (NOREPLICAS) unless this many replicas are connected and current; 1 makes failover-lost-lock's grant fail instead of granting twice (0: off)")
		maxLag := fl.Duration("min-replicas-max-lag", def.MinReplicasMaxLag, "sentinel: how far behind, in whole seconds, a replica may be and still count for --min-replicas-to-write")
		program := fl.String("redis-sentinel", "redis-sentinel", "redis-sentinel executable (looked up on PATH)")
		sentinelFlags := []string{"down-after", "failover-timeout", "min-replicas-to-write", "min-replicas-max-lag"}
		return func(cfg *harness.Config) error {
			cfg.Programs["redis-sentinel"] = *program
			if cfg.Run.Backend != "sentinel" {
				for _, name := range sentinelFlags {
					if fl.Changed(name) {
						return fmt.Errorf("--%s applies to --backend sentinel only", name)
					}
				}
				return nil
			}
			s := sentinel.Settings{DownAfter: *downAfter, FailoverTimeout: *failoverTimeout, MinReplicasToWrite: *minReplicas, MinReplicasMaxLag: *maxLag}
			if err := s.Validate(); err != nil {
				return err
			}
			maps.Copy(cfg.Run.Params, s.Params())
			if slices.Contains(cfg.Run.Nemesis, "failover-lost-lock") && cfg.TTL < 2*sentinelSwitchTime {
				// Not an error: the run is valid, it just cannot show a lost
				// lock, since the lease has expired by the time B is granted.
				slog.Warn(fmt.Sprintf("failover-lost-lock with --ttl %s: the lease ends before the %s failover does, so the second grant breaks no promise; use --ttl 10s", cfg.TTL, sentinelSwitchTime))
			}
			return nil
		}
	})
}

// go-redis's failover client logs every master it finds. In lockcheck's own
// output that is noise, so it goes to the log at info level: --log-level
// info shows it, and a worker's log file keeps it.
func init() { goredis.SetLogger(infoLog{}) }

type infoLog struct{}

func (infoLog) Printf(ctx context.Context, format string, v ...any) {
	slog.InfoContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}
