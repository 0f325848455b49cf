package catalog

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/zookeeper"
)

func init() {
	Register(Backend{
		Name:     "zookeeper",
		Variants: zookeeper.Variants,
		Nodes: func(p Programs, params map[string]string) []backends.NodeSpec {
			// The run flags validated the tick; a bad one here is the default.
			tick, _ := zookeeper.TickFrom(params)
			classpath := params[zookeeper.ParamClasspath]
			if classpath == "" {
				classpath = zookeeper.DefaultClasspath
			}
			// The servers are started by lockcheck itself (in tests, the
			// test binary), which writes their zoo.cfg and becomes java.
			self, err := os.Executable()
			if err != nil {
				self = os.Args[0]
			}
			java := p.Path(zookeeper.Java.Name)
			return []backends.NodeSpec{
				zookeeper.Node("zk-1", self, java, classpath, tick),
				zookeeper.Node("zk-2", self, java, classpath, tick),
				zookeeper.Node("zk-3", self, java, classpath, tick),
			}
		},
		Ready: zookeeper.WaitReady,
		Service: func(all []backends.Endpoint) any {
			return zookeeper.NewEnsemble(all)
		},
		Open: func(s Spec, fp backends.Failpoint) (backends.Lock, error) {
			return zookeeper.New(zookeeper.Options{Client: s.Client(fp), Servers: s.Addrs})
		},
		Fences:    EveryVariant, // the lock znode's creation zxid
		Programs:  []backends.Program{zookeeper.Java},
		Flags:     &Flags{Bind: zookeeperFlags, Derives: []string{zookeeper.ParamSessionTimeout}},
		Signature: []string{"pause-holder"},
		RunNode:   zookeeper.RunServerFromEnv,
		Lease: func(ttl time.Duration, params map[string]string) time.Duration {
			tick, _ := zookeeper.TickFrom(params) // checked by the flags; a bad one is the default
			timeout, _ := sessionTimeout(ttl, tick)
			return timeout
		},
	})
}

// zookeeperFlags are the servers' tick, which bounds the session timeout a
// client gets, and where the server's jars are.
func zookeeperFlags(fl *pflag.FlagSet) func(*Settings) error {
	tick := fl.Duration(zookeeper.ParamTick, zookeeper.DefaultTick, fmt.Sprintf("zookeeper: tickTime of the servers; a session timeout (the lease, asked for with --ttl) is clamped to [%d, %d] ticks, so the default allows sessions of 200ms to 2s (ZooKeeper's own 2s tick could not go below 4s); followers drop a silent leader after %d ticks", zookeeper.MinSessionTicks, zookeeper.MaxSessionTicks, zookeeper.SyncTicks))
	classpath := fl.String(zookeeper.ParamClasspath, zookeeper.DefaultClasspath, "zookeeper: class path of the servers (Debian's zookeeper package, and the slf4j binding without which the server logs nothing; its log is appended to each node's zookeeper.log)")
	return func(s *Settings) error {
		s.Params[zookeeper.ParamTick] = tick.String()
		s.Params[zookeeper.ParamClasspath] = *classpath
		t, err := zookeeper.TickFrom(s.Params)
		if err != nil {
			return err
		}
		timeout, why := sessionTimeout(s.TTL, t)
		s.Params[zookeeper.ParamSessionTimeout] = timeout.String() + why
		return nil
	}
}

// sessionTimeout is the session timeout a client gets for ttl, and why it
// differs from ttl, if it does.
func sessionTimeout(ttl, tick time.Duration) (time.Duration, string) {
	got := zookeeper.SessionTimeout(ttl, tick)
	switch {
	case got > ttl:
		return got, fmt.Sprintf(" (ZooKeeper's shortest session, %d ticks of %s; --ttl was %s)", zookeeper.MinSessionTicks, tick, ttl)
	case got < ttl:
		return got, fmt.Sprintf(" (ZooKeeper's longest session, %d ticks of %s; --ttl was %s: raise --%s)", zookeeper.MaxSessionTicks, tick, ttl, zookeeper.ParamTick)
	}
	return got, ""
}
