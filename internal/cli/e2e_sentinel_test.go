package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
)

func requireSentinel(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-sentinel"); err != nil {
		t.Fatalf("redis-sentinel is not installed (run scripts/setup): %v", err)
	}
}

func TestSentinelCorrectLockWithoutFaultsIsClean(t *testing.T) {
	t.Parallel()
	requireSentinel(t)
	inv, res, dir := runLockcheck(t, "--backend", "sentinel", "--nemesis", "none", "--ttl", "2s", "--time-limit", "5s")
	assert.Equal(t, exitValid, inv.code, inv.stdout)
	c := res.Checks
	assert.Zero(t, c.LeaseSafety.Violations)
	assert.Zero(t, c.DoubleOwnership.Windows)
	assert.Zero(t, c.Resource.LostUpdates+c.Resource.StaleWritesAccepted+c.Resource.StaleWritesRefused)
	assert.Zero(t, c.Fencing.Regressions+c.Fencing.Duplicates)
	assert.Positive(t, c.Liveness.Grants)
	h, err := history.ReadFile(filepath.Join(dir, results.HistoryFile))
	require.NoError(t, err)
	assert.Contains(t, nemesisEvents(h), "role redis-0 master", "the history says who was master from the start")
}

// The lost-lock recipe: the promoted replica never saw the grant, so a
// second client is granted the lock while the first holds it, with the
// same INCR fence; min-replicas-to-write 1 turns the grant into a refusal.
func TestSentinelFailoverLostLock(t *testing.T) {
	testtier.Long(t)
	requireSentinel(t)
	tests := []struct {
		name      string
		extra     []string
		code      int
		violation bool
	}{
		{"without mitigation the lock is granted twice", nil, exitInvalid, true},
		{"min-replicas-to-write 1 refuses instead", []string{"--min-replicas-to-write", "1"}, exitValid, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--backend", "sentinel", "--nemesis", "failover-lost-lock", "--workload", "unfenced",
				"--ttl", "10s", "--nemesis-interval", "3s", "--time-limit", "12s"}, tt.extra...)
			inv, res, dir := runLockcheck(t, args...)
			assert.Equal(t, tt.code, inv.code, inv.stdout)
			c := res.Checks
			h, err := history.ReadFile(filepath.Join(dir, results.HistoryFile))
			require.NoError(t, err)
			events := nemesisEvents(h)
			assert.Contains(t, events, "cut-replicas redis-0 CLIENT KILL TYPE replica")
			assert.True(t, hasPrefix(events, "switch-master "), "the failover happened: %v", events)
			report, err := os.ReadFile(filepath.Join(dir, results.ReportFile))
			require.NoError(t, err)
			if tt.violation {
				assert.GreaterOrEqual(t, c.Resource.LostUpdates, 1)
				// The first violation is the recipe's: A, granted by redis-0
				// alone, and B, granted by the promoted replica, which had
				// neither A's key nor A's INCR.
				a, b := heldAt(h, "alone"), heldAt(h, "while")
				require.NotEmpty(t, a, "a client held the lock granted by redis-0 alone: %v", events)
				require.NotEmpty(t, c.LeaseSafety.Evidence)
				v := c.LeaseSafety.Evidence[0]
				assert.Equal(t, []string{a, b}, []string{v.Earlier.Process.String(), v.Later.Process.String()})
				require.NotEmpty(t, c.Fencing.Anomalies)
				f := c.Fencing.Anomalies[0]
				assert.Equal(t, checker.FenceDuplicate, f.Kind)
				assert.Equal(t, []string{a, b}, []string{f.Earlier.Process.String(), f.Later.Process.String()})
				assert.Equal(t, *f.Earlier.Fence, *f.Later.Fence, "the promoted replica handed out A's fence again")
				assert.Contains(t, f.Cause, "INCR after failover")
				assert.Contains(t, res.Reason, "INCR after failover")
				assert.Contains(t, string(report), "INCR after failover", "the report names the failure")
				return
			}
			assert.Equal(t, checker.Valid, res.Valid, res.Reason)
			assert.Zero(t, c.LeaseSafety.Violations)
			assert.Zero(t, c.Fencing.Duplicates+c.Fencing.Regressions)
			assert.GreaterOrEqual(t, c.Liveness.AcquireRefused, 1, "the master refused the grant (NOREPLICAS)")
			assert.Contains(t, string(report), "refused by the service", "the report shows the refusals")
		})
	}
}

func TestSentinelBadInputIsOneLineAndExitTwo(t *testing.T) {
	store := t.TempDir()
	tests := []badInput{
		{"failover fault without sentinel", []string{"--nemesis", "failover-kill"}, "--nemesis failover-kill needs a service that fails over by itself; backend redis under --runtime process has none (backends that have it: sentinel)"},
		{"sentinel flag without sentinel", []string{"--min-replicas-to-write", "1"}, "--min-replicas-to-write applies to the sentinel topology only, and this run's is redis"},
		{"too many replicas", []string{"--backend", "sentinel", "--min-replicas-to-write", "3"}, "the topology has 2 replicas, give 0 (off) to 2"},
		{"no down-after", []string{"--backend", "sentinel", "--down-after", "0s"}, "--down-after 0s: give a positive whole number of milliseconds"},
		{"lag in milliseconds", []string{"--backend", "sentinel", "--min-replicas-max-lag", "1500ms"}, "whole seconds"},
		{"missing redis-sentinel", []string{"--backend", "sentinel", "--redis-sentinel", "/nonexistent/redis-sentinel"}, "/nonexistent/redis-sentinel not found"},
	}
	assertRefused(t, store, []string{"run", "--out", store}, tests)
}

// heldAt names the client the recipe held with a grant whose detail
// contains word.
func heldAt(h *history.History, word string) string {
	for _, e := range h.Events {
		if e.F == history.NemFailpoint && e.Value != nil && strings.Contains(e.Value.Detail, word) {
			return e.Value.Target
		}
	}
	return ""
}

// nemesisEvents lists a history's nemesis events as "verb target detail".
func nemesisEvents(h *history.History) []string {
	var out []string
	for _, e := range h.Events {
		if e.Process == history.Nemesis && e.Value != nil {
			out = append(out, strings.TrimSpace(e.F+" "+e.Value.Target+" "+e.Value.Detail))
		}
	}
	return out
}

func hasPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
