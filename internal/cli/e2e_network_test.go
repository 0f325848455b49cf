package cli

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/postgres/pgtest"
	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
)

// landings are the details of a run's landing events that landed.
func landings(t *testing.T, dir string) []string {
	t.Helper()
	h, err := history.ReadFile(filepath.Join(dir, results.HistoryFile))
	require.NoError(t, err)
	var out []string
	for _, e := range h.Events {
		if e.F == history.NemLanding && e.Value.Landed != nil && *e.Value.Landed {
			out = append(out, e.Value.Detail)
		}
	}
	return out
}

// Jepsen's Redis partition, without containers: the master with a minority
// of the clients is cut off from the rest, the sentinels promote a
// replica, and both masters grant the lock. min-replicas-to-write 1 with a
// short lag makes the old master refuse instead.
func TestSentinelPartitionMinority(t *testing.T) {
	testtier.Long(t)
	requireSentinel(t)
	tests := []struct {
		name      string
		extra     []string
		violation bool
	}{
		{"two masters grant the lock", nil, true},
		// The old master still writes for up to the lag: an INCR it takes
		// then is lost with it, so a fence may repeat (a finding of its
		// own), but no two clients hold the lock at once.
		{"min-replicas-to-write 1 makes the old master refuse", []string{"--min-replicas-to-write", "1", "--min-replicas-max-lag", "1s"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--backend", "sentinel", "--nemesis", "partition-minority", "--workload", "unfenced",
				"--ttl", "10s", "--pause", "12s", "--nemesis-interval", "3s", "--time-limit", "20s"}, tt.extra...)
			inv, res, dir, landed := runFault(t, args...)
			if !landed {
				return
			}
			details := landings(t, dir)
			require.NotEmpty(t, details)
			assert.Contains(t, details[0], "while the other side had redis-", "the majority promoted a master of its own")
			c := res.Checks
			if tt.violation {
				assert.Equal(t, exitInvalid, inv.code, inv.stdout)
				assert.Positive(t, c.DoubleOwnership.Windows)
				assert.Contains(t, res.Reason, "was cut off from ", "the verdict names the partition in force")
			} else {
				assert.Zero(t, c.DoubleOwnership.Windows)
				assert.Zero(t, c.LeaseSafety.Violations)
				assert.Positive(t, c.Liveness.AcquireRefused, "the old master refused")
			}
		})
	}
}

// etcd's leader cut off with a minority, or the cluster split in halves,
// must stay safe: only the majority side grants.
func TestEtcdPartitionsStaySafe(t *testing.T) {
	testtier.Long(t)
	for _, fault := range []string{"partition-minority", "partition-halves"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			inv, res, dir, landed := runFault(t, "--backend", "etcd", "--nemesis", fault, "--workload", "unfenced",
				"--ttl", "2s", "--time-limit", "12s")
			if !landed {
				return
			}
			assert.Equal(t, exitValid, inv.code, inv.stdout)
			assert.Zero(t, res.Checks.LeaseSafety.Violations)
			assert.NotEmpty(t, landings(t, dir))
		})
	}
}

// With no fault the proxies are transparent: every backend that runs
// behind them stays valid.
func TestNoFaultThroughProxies(t *testing.T) {
	testtier.Long(t)
	for _, backend := range []string{"redis", "sentinel", "redlock", "redsync", "etcd", "zookeeper", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			args := []string{"--backend", backend, "--network", harness.NetworkProxy, "--nemesis", "none",
				"--workload", "unfenced", "--ttl", "2s", "--time-limit", "5s"}
			switch backend {
			case "sentinel":
				requireSentinel(t)
			case "postgres":
				pgtest.Require(t)
				args = append(args, "--replicas", "1") // the standby's replication through the proxies too
			}
			inv, res, _ := runLockcheck(t, args...)
			assert.Equal(t, exitValid, inv.code, inv.stdout)
			assert.Positive(t, res.Checks.Liveness.Grants)
			assert.Equal(t, harness.NetworkProxy, res.Config.Params[harness.ParamNetwork], "the run went through the proxies")
		})
	}
}

// A partition the end of the run cut short, after it had lasted a lease,
// created its moment: it landed, says it was cut short, and the verdict
// never says that no fault landed.
func TestARunEndingDuringAPartitionLanded(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	inv, res, dir := runMayMiss(t, "--backend", "redis", "--network", harness.NetworkProxy, "--nemesis", "partition",
		"--workload", "unfenced", "--ttl", "300ms", "--pause", "20s", "--nemesis-interval", "1s", "--time-limit", "3s")
	require.Equal(t, 1, res.FaultLanding.Injected, inv.stdout)
	assert.Equal(t, 1, res.FaultLanding.Landed, "%s: %s", res.FaultLanding.Missed, inv.stdout)
	details := landings(t, dir)
	require.Len(t, details, 1)
	assert.Regexp(t, `^redis-0 was cut off the network, cut short by the end of the run after \S+ of 20s$`, details[0])
	assert.NotContains(t, res.Reason, "No fault landed")
}
