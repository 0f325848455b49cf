package results

import (
	"fmt"
	"slices"

	"github.com/lockcheck/lockcheck/history"
)

// replayRates are how often the repro.yaml lockcheck wrote for a failing
// run reproduced it (failed the same checks) in 10 replays, as measured on
// a loaded 2-core machine for docs/scenarios.md's table ("From a failing run to a
// scenario"), by the run's backend and faults. Measure again when the
// repro writer, the harness or a backend changes, and update both.
var replayRates = []struct {
	backend string
	faults  []string
	rate    string
}{
	{"redis", []string{"pause-holder"}, "10 of 10"},
	{"etcd", []string{"pause-holder"}, "10 of 10"},
	{"redlock", []string{"clock-pause"}, "10 of 10"},
	{"sentinel", []string{"failover-lost-lock"}, "10 of 10"},
	// Measured 2026-12-01 on --wipe --ttl 1s --time-limit 30s runs that
	// failed resource and fencing (seeds 4, 6 and 10).
	{"redlock", []string{"pause-node", "kill-restart", "clock-skew"}, "10 of 10"},
	// Measured 2026-12-01 on a --ttl 1s --time-limit 30s run (seed 1).
	{"sentinel", []string{"failover-pause", "pause-holder", "kill-restart"}, "8 of 10"},
	// Measured 2026-12-01 on --ttl 1s --pause 4s --time-limit 15s runs,
	// their partitions pinned as partition steps (seeds 1 and 2).
	{"sentinel", []string{"partition-minority"}, "10 of 10"},
	{"sentinel", []string{"partition-halves"}, "10 of 10"},
}

// ReplayRate says how often this run's repro replayed its failure, which
// nobody measured when the run wrote it: "not measured", with how to
// measure it and, where one was measured, the rate of reproductions of
// other runs like cfg's (its backend under the same faults), cited as
// theirs, never as this repro's.
func ReplayRate(cfg history.RunConfig) string {
	s := "not measured for this repro (lockcheck shrink replays it --tries times and says how often it failed)"
	for _, r := range replayRates {
		if r.backend == cfg.Backend && slices.Equal(r.faults, cfg.Nemesis) {
			return s + fmt.Sprintf("; reproductions of other %s runs under %s failed the same checks in %s replays (a class rate, measured on other failures; docs/scenarios.md)",
				r.backend, FaultsName(r.faults), r.rate)
		}
	}
	return s
}
