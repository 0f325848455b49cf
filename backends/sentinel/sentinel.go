// Package sentinel is the Redis Sentinel lock backend: the same lock as the
// single-Redis backend (and the same variants), taken on whichever node the
// sentinels name as master, through go-redis's failover client. Replication
// is asynchronous, so a failover can promote a replica that never saw a
// grant: this backend is where lockcheck shows that.
//
// The topology is one master and two replicas (redis-server) and three
// sentinels (redis-sentinel) with quorum 2, each on its own loopback port
// with its own directory, config and log.
package sentinel

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/redis"
)

// go-redis's failover client logs every master it finds. In lockcheck's own
// output that is noise, so it goes to the log at info level: --log-level
// info shows it, and a worker's log file keeps it.
func init() { goredis.SetLogger(infoLog{}) }

type infoLog struct{}

func (infoLog) Printf(ctx context.Context, format string, v ...any) {
	slog.InfoContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

// MasterName is the name the sentinels monitor the master under.
const MasterName = "lockcheck"

// Topology sizes.
const (
	dataNodes     = 3 // redis-0 starts as master, redis-1 and redis-2 as its replicas
	sentinelNodes = 3
	quorum        = 2
)

// Run params (history.RunConfig.Params) that shape the topology, as the
// CLI's flags of the same names set them.
const (
	ParamDownAfter          = "down-after"            // a Go duration, whole milliseconds
	ParamFailoverTimeout    = "failover-timeout"      // a Go duration, whole milliseconds
	ParamMinReplicasToWrite = "min-replicas-to-write" // an integer, 0 turns it off
	ParamMinReplicasMaxLag  = "min-replicas-max-lag"  // a Go duration, whole seconds
)

// Settings are the Sentinel and replication settings of a topology.
type Settings struct {
	// DownAfter is how long a node must not answer before a sentinel
	// considers it down (down-after-milliseconds).
	DownAfter time.Duration
	// FailoverTimeout bounds a failover's steps; a sentinel also waits twice
	// this long before it tries to fail the same master over again.
	FailoverTimeout time.Duration
	// MinReplicasToWrite makes a master refuse writes (NOREPLICAS) unless
	// that many replicas are connected with a lag of at most
	// MinReplicasMaxLag. It is set on every data node, since any of them
	// may become master.
	MinReplicasToWrite int
	MinReplicasMaxLag  time.Duration
}

// DefaultSettings detect a failure within a second and allow a new failover
// six seconds after the last, so faults can come every few seconds; Redis's
// own defaults (30 s and 3 min) would make a short run see one failover at
// most. min-replicas-to-write is off, as in Redis.
func DefaultSettings() Settings {
	return Settings{DownAfter: time.Second, FailoverTimeout: 3 * time.Second, MinReplicasMaxLag: 10 * time.Second}
}

// Validate names the first setting Redis would not accept, and how to fix it.
func (s Settings) Validate() error {
	switch {
	case s.DownAfter < time.Millisecond || s.DownAfter%time.Millisecond != 0:
		return fmt.Errorf("--down-after %s: give a positive whole number of milliseconds, such as 1000ms", s.DownAfter)
	case s.FailoverTimeout < time.Millisecond || s.FailoverTimeout%time.Millisecond != 0:
		return fmt.Errorf("--failover-timeout %s: give a positive whole number of milliseconds, such as 3s", s.FailoverTimeout)
	case s.MinReplicasToWrite < 0 || s.MinReplicasToWrite > dataNodes-1:
		return fmt.Errorf("--min-replicas-to-write %d: the topology has %d replicas, give 0 (off) to %d", s.MinReplicasToWrite, dataNodes-1, dataNodes-1)
	case s.MinReplicasMaxLag < time.Second || s.MinReplicasMaxLag%time.Second != 0:
		return fmt.Errorf("--min-replicas-max-lag %s: Redis counts it in whole seconds, give 1s or more", s.MinReplicasMaxLag)
	}
	return nil
}

// Params writes the settings as run params.
func (s Settings) Params() map[string]string {
	return map[string]string{
		ParamDownAfter:          s.DownAfter.String(),
		ParamFailoverTimeout:    s.FailoverTimeout.String(),
		ParamMinReplicasToWrite: strconv.Itoa(s.MinReplicasToWrite),
		ParamMinReplicasMaxLag:  s.MinReplicasMaxLag.String(),
	}
}

// SettingsFrom reads the settings from run params. The CLI validates them
// before a run starts; a param that is missing or does not parse (a history
// config edited by hand) keeps its default.
func SettingsFrom(params map[string]string) Settings {
	s := DefaultSettings()
	for key, d := range map[string]*time.Duration{
		ParamDownAfter: &s.DownAfter, ParamFailoverTimeout: &s.FailoverTimeout, ParamMinReplicasMaxLag: &s.MinReplicasMaxLag,
	} {
		if v, err := time.ParseDuration(params[key]); err == nil {
			*d = v
		}
	}
	if n, err := strconv.Atoi(params[ParamMinReplicasToWrite]); err == nil {
		s.MinReplicasToWrite = n
	}
	return s
}

// New returns a lock client that asks the sentinels at sentinelAddrs for the
// master and follows +switch-master to the new one. A command is never
// retried, so one that times out or loses its connection during a failover
// has an unknown outcome.
func New(opts redis.Options, sentinelAddrs []string) (*redis.Lock, error) {
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	return redis.NewWithClient(opts, goredis.NewFailoverClient(&goredis.FailoverOptions{
		MasterName:    MasterName,
		SentinelAddrs: sentinelAddrs,
		Dialer:        backends.Dialer(opts.Source, opts.Timeout),
		DialTimeout:   opts.Timeout,
		ReadTimeout:   opts.Timeout,
		WriteTimeout:  opts.Timeout,
		MaxRetries:    -1,
		PoolSize:      2,
	}))
}
