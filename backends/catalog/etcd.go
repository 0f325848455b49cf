package catalog

import (
	"os"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/etcd"
)

func init() {
	Register(Backend{
		Name:     "etcd",
		Variants: etcd.Variants,
		Nodes: func(_ Programs, params map[string]string) []backends.NodeSpec {
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
		Control: func(all []backends.Endpoint) any {
			return etcd.NewCluster(all)
		},
		Open: func(s Spec, _ backends.Failpoint) (backends.Lock, error) {
			return etcd.New(etcd.Options{Endpoints: s.Addrs, TTL: s.TTL, Fence: s.Fence, Timeout: s.Timeout})
		},
	})
}
