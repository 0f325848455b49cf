// Package withetcd adds the etcd backend to the catalog. Its members are
// lockcheck itself, so it links the etcd server, by far the largest
// dependency lockcheck has: only a program that imports this package
// carries it. cmd/lockcheck does; a program of your own that registers a
// lock (package lockcheck) does not, unless it imports this package for the
// etcd backend or an etcd topology.
package withetcd

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/etcd"
)

func init() {
	catalog.Register(catalog.Backend{
		Name:     "etcd",
		Variants: etcd.Variants,
		Nodes: func(_ catalog.Programs, params map[string]string) []backends.NodeSpec {
			// The run flags validated the timing; a bad one here is the default.
			t, _ := etcd.TimingFrom(params)
			// Members are lockcheck itself (in tests, the test binary).
			self, err := os.Executable()
			if err != nil {
				self = os.Args[0]
			}
			return []backends.NodeSpec{
				etcd.Node("etcd-0", self, t),
				etcd.Node("etcd-1", self, t),
				etcd.Node("etcd-2", self, t),
			}
		},
		Ready: etcd.WaitReady,
		Service: func(all []backends.Endpoint) any {
			return etcd.NewCluster(all)
		},
		Open: func(s catalog.Spec, fp backends.Failpoint) (backends.Lock, error) {
			return etcd.New(etcd.Options{Client: s.Client(fp), Endpoints: s.Addrs})
		},
		Fences:    catalog.EveryVariant, // the key's create revision
		Flags:     &catalog.Flags{Bind: etcdFlags, Derives: []string{etcd.ParamSessionTTL}},
		Signature: []string{"pause-holder"},
		RunNode:   etcd.RunMemberFromEnv,
		Lease: func(ttl time.Duration, params map[string]string) time.Duration {
			t, _ := etcd.TimingFrom(params) // checked by the flags; a bad one is the default
			lease, _ := sessionTTL(ttl, t)
			return lease
		},
	})
}

// etcdFlags are the members' raft timing; they also fix the lease a session
// really gets (the backend's Lease), which the history records.
func etcdFlags(fl *pflag.FlagSet) func(*catalog.Settings) error {
	heartbeat := fl.Duration(etcd.ParamHeartbeat, etcd.DefaultTiming.Heartbeat, "etcd: raft heartbeat interval of the members")
	election := fl.Duration(etcd.ParamElection, etcd.DefaultTiming.Election, "etcd: raft election timeout of the members; etcd's shortest lease is 1.5 times it, rounded up to whole seconds")
	return func(s *catalog.Settings) error {
		s.Params[etcd.ParamHeartbeat] = heartbeat.String()
		s.Params[etcd.ParamElection] = election.String()
		t, err := etcd.TimingFrom(s.Params)
		if err != nil {
			return err
		}
		ttl, why := sessionTTL(s.TTL, t)
		s.Params[etcd.ParamSessionTTL] = ttl.String() + why
		return nil
	}
}

// sessionTTL is the lease an etcd session gets for ttl, and why it differs
// from ttl, if it does.
func sessionTTL(ttl time.Duration, t etcd.Timing) (time.Duration, string) {
	asked := etcd.SessionTTL(ttl)
	switch {
	case t.MinTTL() > asked:
		return t.MinTTL(), fmt.Sprintf(" (etcd's shortest lease with a %s election timeout; --ttl was %s)", t.Election, ttl)
	case asked != ttl:
		return asked, fmt.Sprintf(" (--ttl %s rounded up to etcd's whole seconds)", ttl)
	}
	return asked, ""
}
