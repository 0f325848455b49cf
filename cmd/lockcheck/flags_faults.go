package main

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/pflag"

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
			// Whether the backend can take these faults is nemesis.Validate's
			// decision (harness.Preflight); this only warns of a lease too
			// short for what a fault aims at.
			warnShortLeases(cfg)
			return nil
		}
	})
}

// warnShortLeases warns of a run that is valid but cannot show what its
// faults aim at, since the lease is over before the fault's effect forms.
// (A majority split measures the runtime and says itself when it missed.)
func warnShortLeases(cfg *harness.Config) {
	if slices.Contains(cfg.Run.Nemesis, "failover-lost-lock") && cfg.TTL < 2*failoverSwitchTime {
		slog.Warn(fmt.Sprintf("failover-lost-lock with --ttl %s: the lease ends before the %s failover does, so the second grant breaks no promise; use --ttl 10s", cfg.TTL, failoverSwitchTime))
	}
}

// failoverSwitchTime is how long a failover takes with the default
// --down-after: 2-3 s from losing the master to +switch-master.
const failoverSwitchTime = 3 * time.Second
