package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/zookeeper"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/workloads"
)

// The ZooKeeper runs are not parallel: each starts three JVMs.

// runZooKeeper runs lockcheck against a three-server ensemble and checks
// that no server of the run outlived it.
func runZooKeeper(t *testing.T, args ...string) (invocation, *resultsAndHistory) {
	t.Helper()
	return runServers(t, "zookeeper", serversUnder, args...)
}

// serversUnder lists the live ZooKeeper server processes that run in a
// node directory under dir.
func serversUnder(dir string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []string
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(raw), zookeeper.MainClass) {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join(filepath.Dir(p), "cwd")); err == nil && strings.HasPrefix(cwd, dir) {
			out = append(out, p)
		}
	}
	return out
}

func TestZooKeeperWithoutFaultsIsClean(t *testing.T) {
	inv, r := runZooKeeper(t, "--nemesis", "none", "--ttl", "500ms", "--time-limit", "8s")
	assert.Equal(t, exitValid, inv.code, inv.stdout)
	c := r.checks
	assert.Zero(t, c.LeaseSafety.Violations)
	assert.Zero(t, c.DoubleOwnership.Windows)
	assert.Zero(t, c.Resource.LostUpdates+c.Resource.StaleWritesAccepted+c.Resource.StaleWritesRefused)
	assert.Zero(t, c.Fencing.Regressions+c.Fencing.Duplicates)
	assert.True(t, c.Fencing.Checked, "the lock node's czxid is the fence")
	assert.Equal(t, "ok", c.Linearizability.Result)
	assert.Positive(t, c.Liveness.Grants)

	assert.Equal(t, "500ms", r.config.Params[zookeeper.ParamSessionTimeout])
	assert.EqualValues(t, 500, r.config.LeaseMs, "the session timeout the servers grant")
	assert.EqualValues(t, 1000, r.config.PauseMs, "the default pause outlasts the session")
	for _, g := range grants(r.events) {
		assert.EqualValues(t, 500, g.Value.TTLms, "every grant promises the session timeout the servers granted")
	}
}

// A holder paused past its session timeout loses its node while it still
// believes it holds the lock; unfenced, its late write is a lost update.
func TestZooKeeperUnfencedPausedHolderLosesUpdates(t *testing.T) {
	testtier.Long(t)
	inv, r := runZooKeeper(t, "--workload", "unfenced", "--nemesis", "pause-holder", "--ttl", "500ms", "--pause", "2s", "--time-limit", "10s")
	assertSessionHolderLostUpdates(t, "ZooKeeper", inv, r)
}

// The same pause, fenced with the lock node's czxid: the resource refuses
// the paused holder's write.
func TestZooKeeperFencedPausedHolderIsRefused(t *testing.T) {
	testtier.Long(t)
	inv, r := runZooKeeper(t, "--workload", "fenced", "--fence-source", workloads.FenceFromLock, "--nemesis", "pause-holder", "--ttl", "500ms", "--pause", "2s", "--time-limit", "10s")
	assert.Equal(t, exitValid, inv.code, inv.stdout)
	c := r.checks.Resource
	assert.GreaterOrEqual(t, c.StaleWritesRefused, 1)
	assert.Zero(t, c.LostUpdates)
	assert.Zero(t, c.StaleWritesAccepted)
	assert.Zero(t, r.checks.Fencing.Regressions+r.checks.Fencing.Duplicates, "czxid rises with every grant")
}

// Stopping the leader and killing servers: each new leader shows in the
// history, clients get the lock again afterwards, and ZooKeeper keeps its
// promise.
func TestZooKeeperSurvivesLeaderPausesAndServerRestarts(t *testing.T) {
	testtier.Long(t)
	inv, r := runZooKeeper(t, "--workload", "fenced", "--nemesis", "pause-leader,kill-restart", "--ttl", "500ms", "--time-limit", "12s")
	assert.Equal(t, exitValid, inv.code, inv.stdout)
	assert.Zero(t, r.checks.LeaseSafety.Violations)
	var firstFault int64
	leaders := map[string]bool{}
	for _, e := range r.events {
		if e.Process != history.Nemesis || e.Value == nil {
			continue
		}
		if (e.F == history.NemPause || e.F == history.NemKill) && firstFault == 0 {
			firstFault = e.Time
			assert.True(t, strings.HasPrefix(e.Value.Target, "zk-"), "faults hit servers: %+v", e)
		}
		if e.F == history.NemRole && strings.HasPrefix(e.Value.Detail, "leader") {
			leaders[e.Value.Detail] = true
		}
	}
	require.NotZero(t, firstFault, "a fault was injected")
	assert.GreaterOrEqual(t, len(leaders), 2, "the history shows a new leader epoch: %v", leaders)
	var after int
	for _, g := range grants(r.events) {
		if g.Time > firstFault {
			after++
		}
	}
	assert.Positive(t, after, "clients got the lock again after the faults")
	// A client that gave its session up on a disconnection closed it, which
	// may delete its node at once: its release must not say that it
	// deleted nothing, or the lease outlives the node in the history.
	givingUp := map[history.Process]bool{}
	for _, e := range r.events {
		if e.F != history.FRelease {
			continue
		}
		if e.Type == history.Invoke {
			givingUp[e.Process] = e.Value != nil && e.Value.Detail == workloads.LeaseLost
			continue
		}
		if givingUp[e.Process] {
			assert.NotEqual(t, history.OK, e.Type, "a release that gave its session up has an unknown outcome: %+v", e)
		}
	}
}

func TestZooKeeperBadInputIsOneLineAndExitTwo(t *testing.T) {
	store := t.TempDir()
	tests := []badInput{
		{"tick too short", []string{"run", "--out", store, "--backend", "zookeeper", "--zookeeper-tick", "5ms"}, "--zookeeper-tick \"5ms\": want a whole number of milliseconds of at least 10ms"},
		{"tick not whole milliseconds", []string{"run", "--out", store, "--backend", "zookeeper", "--zookeeper-tick", "1500us"}, "--zookeeper-tick"},
		{"no java", []string{"run", "--out", store, "--backend", "zookeeper", "--java", "/nonexistent/java"}, "apt-get install zookeeper"},
	}
	assertRefused(t, store, nil, tests)
}
