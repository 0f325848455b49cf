package main

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/backends/catalog"
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
			clocks, err := nemesis.ClockSettings(p)
			if err != nil {
				return err
			}
			if err := checkClockFaults(cfg, clocks.Nodes); err != nil {
				return err
			}
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
			if p[harness.ParamRuntime] == harness.RuntimeDocker && cfg.TTL < containerRestartTTL && slices.ContainsFunc(cfg.Run.Nemesis, func(f string) bool { return slices.Contains(majorityFaults, f) }) {
				// Not an error: the run is valid, it just cannot show the
				// broken majority, since the lease is over before it forms.
				slog.Warn(fmt.Sprintf("%s with --runtime docker and --ttl %s: restarting a container takes 0.3-0.5 s, so the lease ends before the paused minority is back and no second majority can overlap it; use --ttl 2s", strings.Join(cfg.Run.Nemesis, ","), cfg.TTL))
			}
			return nil
		}
	})
}

// containerRestartTTL is the shortest TTL under which clock-pause and
// restart-pause can bring a restarted container back within one lease
// (docker start alone takes 0.25 s here).
const containerRestartTTL = 1500 * time.Millisecond

// clockFaults are the faults that move node clocks; majorityFaults those
// that split a majority of at least three nodes.
var (
	clockFaults    = []string{"clock-skew", "clock-pause"}
	majorityFaults = []string{"clock-pause", "restart-pause"}
)

// checkClockFaults refuses, before anything starts, a clock fault on a
// backend whose nodes have no faked clock, a clock-skew of more than a
// minority, and a majority split of fewer than three nodes.
func checkClockFaults(cfg *harness.Config, skewNodes int) error {
	var asked []string
	for _, f := range cfg.Run.Nemesis {
		if slices.Contains(clockFaults, f) || slices.Contains(majorityFaults, f) {
			asked = append(asked, f)
		}
	}
	if len(asked) == 0 {
		return nil
	}
	b, _, err := catalog.Lookup(cfg.Run.Backend, cfg.Run.Variant)
	if err != nil {
		return nil // reported by the caller
	}
	specs := b.Nodes(cfg.Programs, cfg.Run.Params)
	for _, f := range asked {
		if slices.Contains(majorityFaults, f) && len(specs) < 3 {
			return fmt.Errorf("--nemesis %s needs a majority of at least three nodes to split; backend %s has %d (use --backend redlock)", f, cfg.Run.Backend, len(specs))
		}
	}
	faked := 0
	for _, s := range specs {
		if s.FakeClock {
			faked++
		}
	}
	if !slices.ContainsFunc(asked, func(f string) bool { return slices.Contains(clockFaults, f) }) {
		return nil
	}
	if faked == 0 {
		return fmt.Errorf("--nemesis %s: backend %s runs its nodes on the real clock; clock faults need a backend started under libfaketime, such as --backend redlock", asked[0], cfg.Run.Backend)
	}
	if minority := (faked - 1) / 2; slices.Contains(asked, "clock-skew") && skewNodes > minority {
		return fmt.Errorf("--%s %d: at most %d of the %d nodes of %s is a minority", nemesis.ParamSkewNodes, skewNodes, minority, faked, cfg.Run.Backend)
	}
	return nil
}
