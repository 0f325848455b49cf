package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/internal/testtier"
)

// Short runs of the Redlock cases of issue 4, end to end through the CLI on
// five live masters. The measured 20 s and 60 s runs are in the issue.

func TestRedlockWithoutFaultsIsClean(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"redlock", "redsync"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			inv, res, _ := runLockcheck(t, "--backend", backend, "--nemesis", "none", "--ttl", "2s", "--time-limit", "5s")
			assert.Equal(t, exitValid, inv.code, inv.stdout)
			c := res.Checks
			assert.Zero(t, c.LeaseSafety.Violations)
			assert.Zero(t, c.DoubleOwnership.Windows)
			assert.Zero(t, c.Resource.LostUpdates+c.Resource.StaleWritesAccepted+c.Resource.StaleWritesRefused)
			assert.True(t, c.Fencing.Checked, "the INCR fence is handed out")
			assert.Zero(t, c.Fencing.Regressions+c.Fencing.Duplicates)
			assert.Positive(t, c.Liveness.Grants)
		})
	}
}

// Kleppmann's case: a client holds a bare majority, one of its nodes' clock
// jumps, a second client wins the jumped node and the minority. Both clients
// break, and lockcheck's own Redlock names the node whose clock jumped.
func TestClockJumpOnABareMajorityBreaksTheLease(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	for _, backend := range []string{"redlock", "redsync"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			inv, res, dir, landed := runFault(t, "--backend", backend, "--nemesis", "clock-pause", "--fence-source", "none", "--time-limit", "8s")
			if !landed {
				return // runFault checked that the run said why
			}
			assert.Equal(t, exitInvalid, inv.code, inv.stdout)
			require.GreaterOrEqual(t, res.Checks.LeaseSafety.Violations, 1, inv.stdout)
			assert.Regexp(t, `after redlock-\d's clock jumped \+20s`, res.Reason)
			if backend == "redlock" {
				v := res.Checks.LeaseSafety.Evidence[0]
				require.Len(t, v.Earlier.Nodes, 3, "the first grant holds a bare majority")
				shared := ""
				for _, n := range v.Later.Nodes {
					if strings.Contains(strings.Join(v.Earlier.Nodes, " "), n) {
						shared = n
					}
				}
				assert.Contains(t, res.Reason, shared+"'s clock jumped", "the reason names the node both majorities share")
			}
			report, err := os.ReadFile(filepath.Join(dir, "report.html"))
			require.NoError(t, err)
			assert.Contains(t, string(report), "clock jumped &#43;20s", "the report gives the reason")
		})
	}
}

// A node of a bare majority that restarts empty lets a second client in; a
// restart delay longer than the TTL (the documented mitigation) does not,
// and the fault lands as a test of that mitigation.
func TestRestartWithoutPersistence(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	tests := []struct {
		name       string
		delay      string
		violations bool
	}{
		{"at once", "0s", true},
		{"after longer than the TTL", "1s", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inv, res, _, landed := runFault(t, "--backend", "redlock", "--nemesis", "restart-pause", "--restart-delay", tt.delay,
				"--fence-source", "resource", "--time-limit", "8s")
			if !tt.violations {
				require.True(t, landed, "the mitigation is tested whatever the machine: %s", inv.stdout)
				assert.Zero(t, res.Checks.LeaseSafety.Violations, inv.stdout)
				assert.Equal(t, exitValid, inv.code, inv.stdout)
				return
			}
			if landed {
				assert.GreaterOrEqual(t, res.Checks.LeaseSafety.Violations, 1, inv.stdout)
				assert.Contains(t, res.Reason, "was killed")
			}
		})
	}
}

// A fence drawn from the resource's own sequence keeps the data correct
// through every Redlock double grant, for every backend.
func TestResourceFenceKeepsTheDataCorrect(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	tests := []struct {
		name string
		args []string
	}{
		{"redlock clock jump", []string{"--backend", "redlock", "--nemesis", "clock-pause"}},
		{"redsync restart", []string{"--backend", "redsync", "--nemesis", "restart-pause"}},
		{"redis paused holder", []string{"--backend", "redis", "--nemesis", "pause-holder"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inv, res, _, landed := runFault(t, append(tt.args, "--workload", "fenced", "--fence-source", "resource", "--time-limit", "8s")...)
			c := res.Checks.Resource
			assert.Zero(t, c.LostUpdates, inv.stdout)
			assert.Zero(t, c.StaleWritesAccepted, inv.stdout)
			assert.Zero(t, res.Checks.Fencing.Regressions+res.Checks.Fencing.Duplicates)
			assert.NotEqual(t, checker.NotLinearizable, res.Checks.Linearizability.Result)
			if landed && tt.args[1] != "redis" {
				assert.GreaterOrEqual(t, res.Checks.LeaseSafety.Violations, 1, "the lock did break: %s", inv.stdout)
			}
		})
	}
}

func TestRedlockBadInput(t *testing.T) {
	store := t.TempDir()
	tests := []badInput{
		{"unknown fence source", []string{"--fence-source", "clock"}, `--fence-source "clock": choose lock, resource or none`},
		{"clock fault on real clocks", []string{"--backend", "redis", "--nemesis", "clock-skew"}, "--nemesis clock-skew needs a node under a faked clock (libfaketime); backend redis under --runtime process has none (backends that have it: redlock, redsync)"},
		{"majority split of one node", []string{"--backend", "redis", "--nemesis", "restart-pause"}, "--nemesis restart-pause needs at least three nodes"},
		{"skew of a majority", []string{"--backend", "redlock", "--nemesis", "clock-skew", "--skew-nodes", "3"}, "--skew-nodes 3: at most 2 of the 5 nodes"},
		{"zero skew", []string{"--backend", "redlock", "--nemesis", "clock-skew", "--skew", "0s"}, "--skew"},
		{"unknown clock mode", []string{"--backend", "redlock", "--nemesis", "clock-skew", "--clock-mode", "drift"}, "--clock-mode \"drift\": choose jump or strobe"},
		{"node timeout as long as the TTL", []string{"--backend", "redlock", "--redlock-node-timeout", "500ms"}, "small against the --ttl"},
		{"kept data on a node without persistence", []string{"--backend", "redlock", "--wipe=false"}, "keep nothing on disk"},
		{"no tries", []string{"--backend", "redsync", "--redlock-tries", "0"}, "--redlock-tries"},
	}
	assertRefused(t, store, []string{"run", "--out", store}, tests)
}
