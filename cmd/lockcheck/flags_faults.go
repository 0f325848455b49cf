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
	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/nemesis"
)

func init() {
	runFlagHooks = append(runFlagHooks, func(fl *pflag.FlagSet) func(*harness.Config) error {
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
			warnShortLeases(cfg)
			return nil
		}
	})
}

// warnShortLeases warns of a run that is valid but cannot show what its
// faults aim at, since the lease is over before the fault's effect forms.
func warnShortLeases(cfg *harness.Config) {
	if cfg.Run.Params[harness.ParamRuntime] == harness.RuntimeDocker && cfg.TTL < containerRestartTTL && slices.ContainsFunc(cfg.Run.Nemesis, func(f string) bool { return slices.Contains(majorityFaults, f) }) {
		slog.Warn(fmt.Sprintf("%s with --runtime docker and --ttl %s: restarting a container takes 0.3-0.5 s, so the lease ends before the paused minority is back and no second majority can overlap it; use --ttl 2s", strings.Join(cfg.Run.Nemesis, ","), cfg.TTL))
	}
	if slices.Contains(cfg.Run.Nemesis, "failover-lost-lock") && cfg.TTL < 2*failoverSwitchTime {
		slog.Warn(fmt.Sprintf("failover-lost-lock with --ttl %s: the lease ends before the %s failover does, so the second grant breaks no promise; use --ttl 10s", cfg.TTL, failoverSwitchTime))
	}
}

// failoverSwitchTime is how long a failover takes with the default
// --down-after: 2-3 s from losing the master to +switch-master.
const failoverSwitchTime = 3 * time.Second

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
