package catalog

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/mariadb"
)

// ParamWaitTimeout is the run param of the MariaDB sessions' wait_timeout
// (--wait-timeout), which is their lease.
const ParamWaitTimeout = "wait-timeout"

func init() {
	Register(Backend{
		Name:     "mariadb",
		Variants: mariadb.Variants,
		Nodes: func(p Programs, _ map[string]string) []backends.NodeSpec {
			// The node is lockcheck itself (in tests, the test binary),
			// which runs mariadb-install-db and then the server.
			self, err := os.Executable()
			if err != nil {
				self = os.Args[0]
			}
			server, err := mariadb.Server.Find(p.Path(mariadb.Server.Name))
			if err != nil {
				server = p.Path(mariadb.Server.Name) // preflight reports it
			}
			return []backends.NodeSpec{mariadb.Node(mariadb.NodeName, self, server)}
		},
		Service: func(all []backends.Endpoint) any { return mariadb.NewService(all) },
		Open: func(s Spec, fp backends.Failpoint) (backends.Lock, error) {
			if len(s.Addrs) != 1 {
				return nil, fmt.Errorf("mariadb backend needs one address, got %d", len(s.Addrs))
			}
			return mariadb.New(mariadb.Options{Client: s.Client(fp), Addr: s.Addrs[0], WaitTimeout: waitTimeoutParam(s.Extra)})
		},
		Programs:  []backends.Program{mariadb.Server},
		Flags:     &Flags{Bind: mariadbFlags},
		Signature: []string{"pause-holder", "kill-session"},
		RunNode:   mariadb.RunNodeFromEnv,
		// No Fences: GET_LOCK hands out none (--fence-source resource).
		Lease: func(ttl time.Duration, params map[string]string) time.Duration {
			return mariadb.WaitTimeout(waitTimeoutParam(params), ttl)
		},
	})
}

// waitTimeoutParam is the wait_timeout the flags recorded, a Go duration
// and nothing else; 0 when none was: the TTL's.
func waitTimeoutParam(params map[string]string) time.Duration {
	wait, _ := time.ParseDuration(params[ParamWaitTimeout])
	return wait
}

// mariadbFlags are the sessions' wait_timeout, the lease a GET_LOCK lock
// really has, which the default pause must outlast. A lock client program
// on the mariadb topology is told it in init (settings["wait-timeout"])
// and sets it on its own session, as the built-in client does.
func mariadbFlags(fl *pflag.FlagSet) func(*Settings) error {
	wait := fl.Duration(ParamWaitTimeout, 0, "mariadb: wait_timeout each client sets on its session, in whole seconds: the server closes a session idle that long, freeing its GET_LOCK locks, so it is the lease (0: --ttl rounded up to whole seconds, at least 1s)")
	return func(s *Settings) error {
		if *wait < 0 || *wait%time.Second != 0 {
			return fmt.Errorf("--%s %s: MariaDB's wait_timeout is a whole number of seconds, such as 1s", ParamWaitTimeout, *wait)
		}
		// The lease the history header records (lease_ms) says whether
		// the TTL was rounded up; the param is the duration alone.
		s.Params[ParamWaitTimeout] = mariadb.WaitTimeout(*wait, s.TTL).String()
		return nil
	}
}
