package catalog

import (
	"fmt"
	"os"
	"strings"
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

// waitTimeoutParam is the wait_timeout the flags recorded (the param may
// say why after the duration); 0 when none was: the TTL's.
func waitTimeoutParam(params map[string]string) time.Duration {
	v, _, _ := strings.Cut(params[ParamWaitTimeout], " ")
	wait, _ := time.ParseDuration(v)
	return wait
}

// mariadbFlags are the sessions' wait_timeout, the lease a GET_LOCK lock
// really has, which the default pause must outlast.
func mariadbFlags(fl *pflag.FlagSet) func(*Settings) error {
	wait := fl.Duration(ParamWaitTimeout, 0, "mariadb: wait_timeout each client sets on its session, in whole seconds: the server closes a session idle that long, freeing its GET_LOCK locks, so it is the lease (0: --ttl rounded up to whole seconds, at least 1s)")
	return func(s *Settings) error {
		if s.Backend != "mariadb" {
			if s.Changed(ParamWaitTimeout) {
				return fmt.Errorf("--%s applies to --backend mariadb only", ParamWaitTimeout)
			}
			return nil
		}
		if *wait < 0 || *wait%time.Second != 0 {
			return fmt.Errorf("--%s %s: MariaDB's wait_timeout is a whole number of seconds, such as 1s", ParamWaitTimeout, *wait)
		}
		lease := mariadb.WaitTimeout(*wait, s.TTL)
		why := ""
		if *wait == 0 && lease != s.TTL {
			why = fmt.Sprintf(" (--ttl %s rounded up to MariaDB's whole seconds)", s.TTL)
		}
		s.Params[ParamWaitTimeout] = lease.String() + why
		return nil
	}
}
