package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/backends/etcd"
	"github.com/lockcheck/lockcheck/harness"
)

func init() {
	runFlagHooks = append(runFlagHooks, func(fl *pflag.FlagSet) func(*harness.Config) error {
		heartbeat := fl.Duration(etcd.ParamHeartbeat, etcd.DefaultTiming.Heartbeat, "etcd: raft heartbeat interval of the members")
		election := fl.Duration(etcd.ParamElection, etcd.DefaultTiming.Election, "etcd: raft election timeout of the members; etcd's shortest lease is 1.5 times it, rounded up to whole seconds")
		return func(cfg *harness.Config) error {
			if cfg.Run.Backend != "etcd" {
				return nil
			}
			cfg.Run.Params[etcd.ParamHeartbeat] = heartbeat.String()
			cfg.Run.Params[etcd.ParamElection] = election.String()
			t, err := etcd.TimingFrom(cfg.Run.Params)
			if err != nil {
				return err
			}
			ttl, why := sessionTTL(cfg.TTL, t)
			cfg.Run.Params[etcd.ParamSessionTTL] = ttl.String() + why
			// The default pause outlasts the lease a session really has,
			// not the --ttl it asked for.
			if !fl.Changed("pause") {
				cfg.Pause = 2 * ttl
				cfg.Run.PauseMs = cfg.Pause.Milliseconds()
				if !fl.Changed("nemesis-interval") {
					cfg.Interval = cfg.Pause + time.Second
					cfg.Run.NemesisEveryMs = cfg.Interval.Milliseconds()
				}
			}
			return nil
		}
	})
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
