package main

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/backends/redlock"
	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/nemesis"
)

// redlockBackends are the backends that run over Redlock's five masters.
var redlockBackends = []string{"redlock", "redsync"}

func init() {
	runFlagHooks = append(runFlagHooks, func(fl *pflag.FlagSet) func(*harness.Config) error {
		nodeTimeout := fl.Duration(redlock.ParamNodeTimeout, 0, "redlock, redsync: time limit of each command on one node, small against the TTL (0: TTL/10); redsync's WithTimeoutFactor")
		drift := fl.Float64(redlock.ParamDriftFactor, redlock.DefaultDriftFactor, "redlock, redsync: clock drift allowance as a fraction of the TTL; validity = TTL − elapsed − TTL×factor (− 2 ms for redlock); redsync's WithDriftFactor")
		tries := fl.Int(redlock.ParamTries, 1, "redlock, redsync: rounds one acquire may play before it is refused (1: the client loop retries after --retry); redsync's WithTries")
		retryDelay := fl.Duration(redlock.ParamRetryDelay, 0, "redlock, redsync: pause between rounds when --redlock-tries is above 1 (redlock: a random pause up to it, 0: the node timeout; redsync: WithRetryDelay, 0: its own 50-250ms)")
		skew := fl.Duration(nemesis.ParamSkew, nemesis.DefaultSkew, "clock-skew, clock-pause: how far a node's wall clock jumps; negative jumps back (--skew=-20s)")
		skewNodes := fl.Int(nemesis.ParamSkewNodes, 1, "clock-skew: how many nodes' clocks move together (a minority)")
		clockMode := fl.String(nemesis.ParamClockMode, nemesis.ClockJump, "clock-skew: jump (one jump for --pause, then back) or strobe (back and forth every --strobe-period for --pause)")
		period := fl.Duration(nemesis.ParamStrobePeriod, nemesis.DefaultStrobePeriod, "clock-skew with --clock-mode strobe: how long each phase lasts")
		return func(cfg *harness.Config) error {
			p := cfg.Run.Params
			p[nemesis.ParamSkew] = skew.String()
			p[nemesis.ParamSkewNodes] = strconv.Itoa(*skewNodes)
			p[nemesis.ParamClockMode] = *clockMode
			p[nemesis.ParamStrobePeriod] = period.String()
			if !slices.Contains(redlockBackends, cfg.Run.Backend) {
				return nil
			}
			p[redlock.ParamNodeTimeout] = nodeTimeout.String()
			p[redlock.ParamDriftFactor] = strconv.FormatFloat(*drift, 'g', -1, 64)
			p[redlock.ParamTries] = strconv.Itoa(*tries)
			p[redlock.ParamRetryDelay] = retryDelay.String()
			if _, err := redlock.ParseParams(p, redlock.Options{}); err != nil {
				return err
			}
			if *nodeTimeout >= cfg.TTL {
				return fmt.Errorf("--%s %s: a node timeout must be small against the --ttl %s, or one slow node eats the whole validity", redlock.ParamNodeTimeout, nodeTimeout, cfg.TTL)
			}
			// Redlock's nodes keep nothing on disk: a restarted node always
			// comes back empty, and the history should say so.
			if fl.Changed("wipe") && p[nemesis.ParamWipe] != "true" {
				return fmt.Errorf("--wipe=false: %s nodes keep nothing on disk, so a restarted node always comes back empty; drop --wipe=false (use --restart-delay for the documented mitigation)", cfg.Run.Backend)
			}
			p[nemesis.ParamWipe] = "true"
			return nil
		}
	})
}
