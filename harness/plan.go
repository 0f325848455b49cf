package harness

import (
	"cmp"
	"maps"
	"time"

	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads"
	"github.com/lockcheck/lockcheck/workloads/resource"
)

// Defaults are what a run's request leaves zero, in one place: run's
// flags show them as their defaults, a scenario file and locktest.Options
// take them for the fields they leave out, and client check for what it
// does not set. The pause and the time between faults follow from the
// lease the backend grants (NewPlan), never from the TTL asked.
var Defaults = Config{
	Run: history.RunConfig{
		Workload: workloads.Unfenced, FenceSource: workloads.FenceFromLock, Resource: resource.Memory,
		Clients: 3, Keys: 1,
	},
	TTL: 500 * time.Millisecond, Limit: 5 * time.Second, Think: "20ms",
	Retry: 10 * time.Millisecond, OpTimeout: time.Second,
}

// NewPlan is the one constructor of a run: req is what a caller asks
// (run's flags, a scenario file, locktest.Options, client check, a
// compare or soak cell map their input into it), its zero fields take
// the Defaults, and the result is resolved and checked once, before
// anything starts: the lock it tests (Config.Target), the lease that
// lock grants for the TTL, the pause that outlasts that lease (twice it)
// and the time between faults (the pause and a second), a seed when it
// has none, then every range and relation Preflight checks. Run runs
// only a plan: given a configuration NewPlan did not make, it makes it
// first.
func NewPlan(req Config) (Config, error) {
	cfg := req
	d := Defaults
	cfg.Run.Workload = cmp.Or(cfg.Run.Workload, d.Run.Workload)
	cfg.Run.FenceSource = cmp.Or(cfg.Run.FenceSource, d.Run.FenceSource)
	cfg.Run.Resource = cmp.Or(cfg.Run.Resource, d.Run.Resource)
	cfg.Run.Clients = cmp.Or(cfg.Run.Clients, d.Run.Clients)
	cfg.Run.Keys = cmp.Or(cfg.Run.Keys, d.Run.Keys)
	cfg.TTL = cmp.Or(cfg.TTL, d.TTL)
	cfg.Limit = cmp.Or(cfg.Limit, d.Limit)
	cfg.Think = cmp.Or(cfg.Think, d.Think)
	cfg.Retry = cmp.Or(cfg.Retry, d.Retry)
	cfg.OpTimeout = cmp.Or(cfg.OpTimeout, d.OpTimeout)
	// The header records the think time the clients use: one value.
	cfg.Run.Think = cfg.Think
	cfg.Run.Params = maps.Clone(cfg.Run.Params)
	if cfg.Run.Params == nil {
		cfg.Run.Params = map[string]string{}
	}
	if cfg.Run.Seed == 0 {
		cfg.Run.Seed = PickSeed()
	}
	b, err := cfg.target()
	if err != nil {
		return cfg, err
	}
	cfg.Target = b
	if cfg.Run.Variant == "" {
		cfg.Run.Variant = b.Variants[0]
	}
	if cfg.Lease == 0 {
		cfg.Lease = b.GrantedLease(cfg.TTL, cfg.Run.Params)
	}
	if cfg.Pause == 0 {
		// A paused holder outlives the lease the backend really grants.
		cfg.Pause = 2 * cfg.Lease
	}
	if cfg.Interval == 0 {
		cfg.Interval = cfg.Pause + time.Second
		// A run too short for a step a pause plus a second after the
		// start (a 70s pause in 90s, to outlast a library's 60s lease)
		// gets one that starts and ends within it: a pause cut short by
		// the run's end lands nothing.
		if room := cfg.Limit - cfg.Pause; cfg.Interval+cfg.Pause > cfg.Limit && room > 0 {
			cfg.Interval = room / 2
		}
	}
	if _, err := Preflight(cfg); err != nil {
		return cfg, err
	}
	cfg.planned = true
	return cfg, nil
}

// PickSeed is a seed for a run that was given none: the one place a seed
// is drawn (the command line prints it, so that the run can be repeated).
func PickSeed() int64 { return time.Now().UnixNano()%1_000_000 + 1 }

// planned is cfg as a plan: cfg itself if NewPlan made it.
func planned(cfg Config) (Config, error) {
	if cfg.planned {
		return cfg, nil
	}
	return NewPlan(cfg)
}
