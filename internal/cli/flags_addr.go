package cli

import (
	"fmt"
	"net"
	"strings"

	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/harness"
)

func init() { runFlagHooks = append(runFlagHooks, addrFlags) }

// addrFlags declares --addr (a lock service that is already running) and
// --key-prefix.
func addrFlags(fl *pflag.FlagSet) func(*harness.Config) error {
	addrs := fl.StringSlice("addr", nil, "HOST:PORT[,HOST:PORT...] of a lock service that is already running: lockcheck starts no nodes, runs only faults that need none (pause-holder, pause-client, kill-client, failpoints) and deletes its keys at the end")
	prefix := fl.String("key-prefix", "", "with --addr: prefix of every lock key (default lockcheck:<run id>:)")
	return func(cfg *harness.Config) error {
		if len(*addrs) == 0 {
			if fl.Changed("key-prefix") {
				return fmt.Errorf("--key-prefix is for a service given with --addr; lockcheck's own nodes start empty")
			}
			return nil
		}
		for _, a := range *addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return fmt.Errorf("--addr %q: %v (give HOST:PORT[,HOST:PORT...])", a, err)
			}
		}
		cfg.Addrs, cfg.KeyPrefix = *addrs, *prefix
		if !fl.Changed("key-prefix") {
			cfg.KeyPrefix = harness.NewKeyPrefix()
		}
		cfg.Run.Params[harness.ParamAddr] = strings.Join(cfg.Addrs, ",")
		cfg.Run.Params[harness.ParamKeyPrefix] = cfg.KeyPrefix
		return nil
	}
}
