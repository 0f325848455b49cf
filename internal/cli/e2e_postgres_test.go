package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/postgres/pgtest"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
)

// sessionKills reads a run's kill-session events.
func sessionKills(t *testing.T, dir string) []history.Event {
	t.Helper()
	h, err := history.ReadFile(filepath.Join(dir, results.HistoryFile))
	require.NoError(t, err)
	var out []history.Event
	for _, e := range h.Events {
		if e.Process == history.Nemesis && e.F == history.NemKillSession {
			out = append(out, e)
		}
	}
	return out
}

// landedKills are the kill-session events that were not followed by word
// that they missed.
func landedKills(events []history.Event) int {
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e.Value.Detail, history.MissedPrefix) {
			n--
		} else {
			n++
		}
	}
	return n
}

// noPostgresLeft fails if a PostgreSQL server of the run's nodes still runs.
func noPostgresLeft(t *testing.T, dir string) {
	t.Helper()
	assert.Eventually(t, func() bool {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && strings.Contains(string(cmdline), dir) {
				stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
				if !strings.Contains(string(stat), ") Z") {
					return false
				}
			}
		}
		return true
	}, 10*time.Second, 100*time.Millisecond, "a postgres process of %s outlived the run", dir)
}

func TestPostgresKilledSessionDoubleOwnership(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	pgtest.Require(t)
	tests := []struct {
		name    string
		args    []string
		code    int
		valid   checker.Validity
		unsafe  bool
		lostAny bool
	}{
		// The killed session's lock went to another client while its
		// holder, parked before its write, still believed it: it then
		// writes through its own connection to the resource.
		{"session", []string{"--resource", "postgres"}, exitInvalid, checker.Invalid, true, true},
		// The write runs in the lock's transaction, which died with the
		// session: nothing the killed client writes commits.
		{"xact", []string{"--variant", "xact", "--resource", "postgres"}, exitValid, checker.Valid, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, res, dir := runLockcheck(t, append([]string{"--backend", "postgres", "--workload", "unfenced", "--nemesis", "kill-session", "--pause", "1s", "--time-limit", "12s"}, tt.args...)...)
			assert.Equal(t, tt.code, inv.code, inv.stdout)
			assert.Equal(t, tt.valid, res.Valid)
			assert.Equal(t, "postgres", res.Resource)
			kills := sessionKills(t, dir)
			require.Positive(t, landedKills(kills), "no kill-session landed")
			c := res.Checks
			assert.Zero(t, c.LeaseSafety.Violations, "PostgreSQL keeps its promise: a grant after the kill is no violation")
			assert.Positive(t, c.DoubleOwnership.Windows, "the killed client believed on after the next grant")
			if tt.lostAny {
				assert.Positive(t, c.Resource.LostUpdates)
			} else {
				assert.Zero(t, c.Resource.LostUpdates)
				assert.Zero(t, c.Resource.StaleWritesAccepted)
			}
			noPostgresLeft(t, dir)
		})
	}
}

func TestPostgresResourceFencesInTheDatabase(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	pgtest.Require(t)
	inv, res, dir := runLockcheck(t, "--backend", "redis", "--resource", "postgres", "--workload", "fenced", "--nemesis", "pause-holder", "--ttl", "500ms", "--time-limit", "10s")
	assert.Equal(t, exitValid, inv.code, inv.stdout)
	assert.Equal(t, checker.Valid, res.Valid)
	assert.Equal(t, "postgres", res.Resource)
	require.Positive(t, res.Checks.Resource.StaleWritesRefused, "the paused holder's stale write was refused")
	for _, a := range res.Checks.Resource.Anomalies {
		if a.Kind == checker.StaleWriteRefused {
			assert.Regexp(t, `UPDATE \.\.\. WHERE (fence_token|read_fence) <=? \d+ matched no row`, a.Reason, "refused by the database's own condition")
		}
	}
	entries, err := history.ReadResourceLog(filepath.Join(dir, results.ResourceFile))
	require.NoError(t, err)
	for i, e := range entries {
		assert.Equal(t, int64(i+1), e.Seq, "the audit table's bigserial order, without gaps")
	}
	noPostgresLeft(t, dir)

	inv, res, _ = runLockcheck(t, "--backend", "redis", "--resource", "postgres", "--workload", "unfenced", "--nemesis", "pause-holder", "--ttl", "500ms", "--time-limit", "10s")
	assert.Equal(t, exitInvalid, inv.code, inv.stdout)
	assert.Positive(t, res.Checks.Resource.LostUpdates)
}

func TestPostgresXactNeedsTheDatabaseResource(t *testing.T) {
	inv := lockcheck("run", "--backend", "postgres", "--variant", "xact", "--out", t.TempDir())
	assert.Equal(t, exitUnknown, inv.code)
	assert.Contains(t, inv.stderr, "--resource postgres")
}

func TestKillSessionNeedsSessions(t *testing.T) {
	inv := lockcheck("run", "--backend", "redis", "--nemesis", "kill-session", "--out", t.TempDir())
	assert.Equal(t, exitUnknown, inv.code)
	assert.Regexp(t, `backends that have it: [a-z, ]*postgres`, inv.stderr)
}

// A standby is for the postgres backend's session locks only, and
// failover-promote needs one: each refusal is one line naming the fix.
func TestPostgresStandbyBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"two standbys", []string{"--backend", "postgres", "--replicas", "2"}, "--replicas 2: choose 0 or 1"},
		{"another backend", []string{"--backend", "redis", "--replicas", "1"}, "--replicas applies to the postgres topology only, and this run's is redis"},
		{"xact with a standby", []string{"--backend", "postgres", "--variant", "xact", "--resource", "postgres", "--nemesis", "failover-promote"}, "use --variant session"},
		{"failover without a standby", []string{"--backend", "redis", "--nemesis", "failover-promote"}, "--backend postgres --replicas 1"},
		{"a wiped primary with a standby", []string{"--backend", "postgres", "--replicas", "1", "--nemesis", "kill-restart", "--wipe"}, "drop --wipe or --replicas"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := lockcheck(append([]string{"run", "--out", t.TempDir()}, tt.args...)...)
			assert.Equal(t, exitUnknown, inv.code, inv.stderr)
			assert.Contains(t, inv.stderr, tt.want)
			assert.Equal(t, 1, strings.Count(strings.TrimSpace(inv.stderr), "\n")+1, "one line: %s", inv.stderr)
		})
	}
}
