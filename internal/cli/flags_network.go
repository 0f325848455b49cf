package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/nemesis"
)

func init() {
	runFlagHooks = append(runFlagHooks, func(fl *pflag.FlagSet) func(*harness.Config) error {
		network := fl.String(harness.ParamNetwork, "", "process runtime: proxy (every connection between clients and nodes, and between nodes, goes through lockcheck's proxies, where the network faults cut, slow and break links) or direct (loopback); empty: proxy when a fault needs links, else direct")
		clients := fl.Int(nemesis.ParamPartitionClients, 0, "partition-minority: clients on the cut node's side (0: a minority of them, at least one; partition cuts a node off alone)")
		latency := fl.Duration(nemesis.ParamLatency, nemesis.DefaultLatency, "slow-link: delay of every message each way")
		jitter := fl.Duration(nemesis.ParamJitter, nemesis.DefaultJitter, "slow-link: up to this much more delay, at random")
		reset := fl.Float64(nemesis.ParamResetShare, nemesis.DefaultResetShare, "flaky-link: share of the links' connections reset, open ones and new ones")
		return func(cfg *harness.Config) error {
			switch *network {
			case "", harness.NetworkProxy, harness.NetworkDirect:
			default:
				return fmt.Errorf("--%s %q: choose %s or %s", harness.ParamNetwork, *network, harness.NetworkProxy, harness.NetworkDirect)
			}
			p := cfg.Run.Params
			if *network != "" {
				p[harness.ParamNetwork] = *network
			}
			p[nemesis.ParamPartitionClients] = strconv.Itoa(*clients)
			p[nemesis.ParamLatency] = latency.String()
			p[nemesis.ParamJitter] = jitter.String()
			p[nemesis.ParamResetShare] = strconv.FormatFloat(*reset, 'g', -1, 64)
			return nil
		}
	})
}
