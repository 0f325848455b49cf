package sentinel

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/redis"
)

// DataName names the i-th redis-server node; redis-0 starts as master.
func DataName(i int) string { return "redis-" + strconv.Itoa(i) }

// SentinelName names the i-th redis-sentinel node.
func SentinelName(i int) string { return "sentinel-" + strconv.Itoa(i) }

// ConfigFile is each sentinel's config, in its node directory. The sentinel
// rewrites it as it learns (the current master, the epoch), so a sentinel
// that restarts keeps what it knew.
const ConfigFile = "sentinel.conf"

// Nodes is the topology: three redis-server nodes, redis-0 the master and
// the others its replicas, then three sentinels monitoring redis-0.
// redisServer and redisSentinel are the executables.
func Nodes(redisServer, redisSentinel string, s Settings) []backends.NodeSpec {
	var specs []backends.NodeSpec
	for i := 0; i < dataNodes; i++ {
		spec := redis.Node(DataName(i), redisServer)
		base := spec.Args
		replica := i > 0
		spec.Args = func(self backends.Endpoint, all []backends.Endpoint) []string {
			args := append(base(self, all),
				// A full sync starts at once instead of waiting 5 s for more
				// replicas: a node that rejoins is in sync sooner.
				"--repl-diskless-sync-delay", "0",
				"--min-replicas-to-write", strconv.Itoa(s.MinReplicasToWrite),
				"--min-replicas-max-lag", strconv.Itoa(int(s.MinReplicasMaxLag/time.Second)),
			)
			if replica {
				// A replica that restarts follows redis-0 again, whatever
				// it is now; the sentinels reconfigure it to the master.
				master := endpoint(all, DataName(0))
				args = append(args, "--replicaof", master.HostName(), strconv.Itoa(master.Ports[0]))
			}
			return args
		}
		specs = append(specs, spec)
	}
	for i := 0; i < sentinelNodes; i++ {
		spec := redis.Node(SentinelName(i), redisSentinel)
		spec.Args = func(self backends.Endpoint, all []backends.Endpoint) []string {
			return sentinelArgs(self, all, s)
		}
		specs = append(specs, spec)
	}
	return specs
}

// sentinelArgs writes the sentinel's config on its first start and points
// the sentinel at it. A restarted sentinel reads the config it rewrote
// itself. NodeSpec.Args cannot fail, so a config that cannot be written
// shows as the sentinel's own complaint that it cannot open its config,
// which the harness reports when the node exits before it is ready.
func sentinelArgs(self backends.Endpoint, all []backends.Endpoint, s Settings) []string {
	path := filepath.Join(self.Dir, ConfigFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		os.WriteFile(path, []byte(sentinelConfig(self, all, s)), 0o644) //nolint:errcheck // see above
	}
	// --sentinel lets the path of a plain redis-server stand in for
	// redis-sentinel.
	return []string{path, "--sentinel"}
}

// sentinelConfig is a sentinel's first config. It already names the
// replicas and the other sentinels, with fixed IDs, so the sentinels need
// not discover each other (hello messages every 2 s, a replica list every
// 10 s) before they can agree on a failover.
func sentinelConfig(self backends.Endpoint, all []backends.Endpoint, s Settings) string {
	master := endpoint(all, DataName(0))
	lines := []string{
		"bind " + self.BindAddr(),
		"protected-mode " + redis.ProtectedMode(self),
		"port " + strconv.Itoa(self.ListenPort(0)),
		"dir " + self.Dir,
		"logfile sentinel.log",
		"daemonize no",
		"sentinel myid " + sentinelID(self.Name),
		fmt.Sprintf("sentinel monitor %s %s %d %d", MasterName, master.HostName(), master.Ports[0], quorum),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", MasterName, s.DownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", MasterName, s.FailoverTimeout.Milliseconds()),
		fmt.Sprintf("sentinel parallel-syncs %s 1", MasterName),
	}
	if self.Source != "" {
		// Through the process runtime's proxies: the sentinel's links come
		// from its own address, and it tells the others (hello messages)
		// the address they reach it at.
		lines = append(lines, "bind-source-addr "+self.Source,
			"sentinel announce-ip "+self.HostName(), "sentinel announce-port "+strconv.Itoa(self.Ports[0]))
	}
	for i := 1; i < dataNodes; i++ {
		replica := endpoint(all, DataName(i))
		lines = append(lines, fmt.Sprintf("sentinel known-replica %s %s %d", MasterName, replica.HostName(), replica.Ports[0]))
	}
	for i := 0; i < sentinelNodes; i++ {
		if other := endpoint(all, SentinelName(i)); other.Name != self.Name {
			lines = append(lines, fmt.Sprintf("sentinel known-sentinel %s %s %d %s", MasterName, other.HostName(), other.Ports[0], sentinelID(other.Name)))
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// sentinelID is a sentinel's fixed 40-hex-digit ID.
func sentinelID(name string) string {
	sum := sha1.Sum([]byte("lockcheck " + name))
	return hex.EncodeToString(sum[:])
}

// endpoint finds a node of the topology by name; the names are fixed by
// Nodes, so a missing one is a programming error.
func endpoint(all []backends.Endpoint, name string) backends.Endpoint {
	for _, e := range all {
		if e.Name == name {
			return e
		}
	}
	panic("sentinel: the topology has no node " + name)
}

// SentinelAddrs are what clients connect to: the sentinels, which name the
// master.
func SentinelAddrs(all []backends.Endpoint) []string {
	var addrs []string
	for i := 0; i < sentinelNodes; i++ {
		addrs = append(addrs, endpoint(all, SentinelName(i)).Addr())
	}
	return addrs
}

// Ready waits until the topology serves as one: every sentinel names the
// same master, both replicas are connected to it and in sync, and every
// sentinel sees both replicas and both other sentinels, so that a failover
// can be agreed on from the first fault. The master is redis-0 unless the
// sentinels failed over while the nodes were still starting (a container
// that answers late on a busy machine is down to them): then the run starts
// with the master they agreed on, which the history records as each node's
// role at the start, and every fault finds the master of the moment.
func Ready(ctx context.Context, all []backends.Endpoint) error {
	c := NewService(all)
	return poll(ctx, 50*time.Millisecond, func() error { return c.readyOnce(ctx) })
}

func (c *Service) readyOnce(ctx context.Context) error {
	if _, err := c.Settled(ctx); err != nil {
		return err
	}
	for _, s := range c.sentinels {
		sc := sentinelClient(s.Addr())
		m, err := sc.Master(ctx, MasterName).Result()
		sc.Close()
		switch {
		case err != nil:
			return fmt.Errorf("%s: %w", s.Name, err)
		case m["num-slaves"] != strconv.Itoa(dataNodes-1):
			return fmt.Errorf("%s knows %s of %d replicas", s.Name, m["num-slaves"], dataNodes-1)
		case m["num-other-sentinels"] != strconv.Itoa(sentinelNodes-1):
			return fmt.Errorf("%s knows %s of %d other sentinels", s.Name, m["num-other-sentinels"], sentinelNodes-1)
		}
	}
	return nil
}

func sentinelClient(addr string) *goredis.SentinelClient {
	return goredis.NewSentinelClient(&goredis.Options{
		Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, PoolSize: 1,
	})
}

// Program is the executable of the sentinel nodes.
var Program = backends.Program{Name: "redis-sentinel", Package: "redis-sentinel"}
