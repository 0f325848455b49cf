package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/postgres"
	"github.com/lockcheck/lockcheck/backends/postgres/pgtest"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/internal/testtier"
)

func requirePgBouncer(t *testing.T) {
	t.Helper()
	pgtest.Require(t)
	if _, err := postgres.Pooler.Find(postgres.Pooler.Name); err != nil {
		t.Fatalf("PgBouncer is not installed (run scripts/setup): %v", err)
	}
}

// Through a real PgBouncer with no fault: session pooling keeps the
// advisory lock the client's alone; transaction pooling hands the holder's
// server session, and with it the lock, to other clients, and the reason
// names the sessions.
func TestPgBouncerPoolModes(t *testing.T) {
	t.Parallel()
	requirePgBouncer(t)
	tests := []struct {
		name  string
		args  []string
		valid checker.Validity
	}{
		{"session pooling", []string{"--pool-mode", "session"}, checker.Valid},
		{"transaction pooling, simple protocol", []string{"--pool-mode", "transaction", "--query-exec-mode", "simple_protocol"}, checker.Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, res, dir := runLockcheck(t, append([]string{"--backend", "postgres", "--pooler", "pgbouncer", "--nemesis", "none", "--time-limit", "4s"}, tt.args...)...)
			assert.Equal(t, tt.valid, res.Valid, inv.stdout)
			assert.FileExists(t, filepath.Join(dir, "nodes", postgres.PoolerName, "pgbouncer.ini"))
			if tt.valid == checker.Invalid {
				assert.Positive(t, res.Checks.LeaseSafety.Violations)
				assert.Contains(t, res.Reason, "server session")
				require.NotNil(t, res.Sessions)
			}
			noPostgresLeft(t, dir)
		})
	}
}

// A kill of the pooler closes its server connections, and the server ends
// those sessions and frees their locks: no lease outlives it, and the
// clients take the lock again once it is back.
func TestPgBouncerKillRestartOfThePooler(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	requirePgBouncer(t)
	file := filepath.Join(t.TempDir(), "kill-pooler.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`name: kill-pooler
backend: postgres
workload: fenced
fence_source: resource
ttl: 300ms
clients: 3
think: 100ms
time_limit: 5s
params: {pooler: pgbouncer, pool-mode: session}
timeline:
  - {at: 1s, do: restart, target: pgbouncer-0}
expect:
  verdict: "true"
  hold: [lease_safety]
`), 0o644))
	store := t.TempDir()
	inv := lockcheck("scenario", "run", "--file", file, "--out", store)
	assert.Equal(t, exitValid, inv.code, inv.stdout+inv.stderr)
	assert.Contains(t, inv.stdout, "PASS")
	noPostgresLeft(t, store)
}

// A run through the pooler stopped by SIGINT or killed by SIGKILL leaves no
// pgbouncer, postgres or worker process behind.
func TestPgBouncerInterruptedRunLeavesNothing(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	requirePgBouncer(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			store := t.TempDir()
			cmd, _, _ := lockcheckProcess(t, "run", "--out", store, "--backend", "postgres", "--pooler", "pgbouncer",
				"--nemesis", "none", "--time-limit", "5m")
			waitForGrants(t, store)
			require.NoError(t, cmd.Process.Signal(sig))
			exitCode(t, cmd)
			assert.Eventually(t, func() bool { return len(processesUsing(store)) == 0 }, 20*time.Second, 100*time.Millisecond,
				"nothing outlives lockcheck: %v", processesUsing(store))
			noPostgresLeft(t, store)
			for _, p := range processesNamed("pgbouncer") {
				assert.NotContains(t, p, store, "a pgbouncer of the run outlived it")
			}
		})
	}
}

// processesNamed lists the command lines of live processes whose command
// line contains name.
func processesNamed(name string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), name) {
			out = append(out, strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return out
}

// Bad pooler settings are refused before anything starts, with the fix.
func TestPgBouncerBadInput(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--backend", "postgres", "--pooler", "odyssey"}, "--pooler \"odyssey\": choose pgbouncer"},
		{[]string{"--backend", "postgres", "--pool-mode", "transaction"}, "--pool-mode applies to --pooler pgbouncer only"},
		{[]string{"--backend", "postgres", "--pooler", "pgbouncer", "--pool-mode", "statement"}, "--pool-mode \"statement\": choose session or transaction"},
		{[]string{"--backend", "postgres", "--pooler", "pgbouncer", "--replicas", "1"}, "not with a standby"},
		{[]string{"--backend", "postgres", "--query-exec-mode", "fast"}, "--query-exec-mode \"fast\""},
		{[]string{"--backend", "redis", "--pooler", "pgbouncer"}, "--pooler applies to the postgres topology only, and this run's is redis"},
		// A lock client program takes the settings of its topology, and
		// is refused those of another, or of lockcheck's own client.
		{[]string{"--client", "/usr/bin/python3 lock.py", "--topology", "redis", "--pool-size", "3"}, "--pool-size applies to the postgres topology only, and this run's is redis"},
		{[]string{"--client", "/usr/bin/python3 lock.py", "--topology", "postgres", "--query-exec-mode", "exec"}, "--query-exec-mode is how lockcheck's own PostgreSQL client (pgx) sends its statements"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			inv := lockcheck(append([]string{"run", "--out", t.TempDir()}, tt.args...)...)
			assert.Equal(t, exitUnknown, inv.code)
			assert.Contains(t, inv.stderr, tt.want)
		})
	}
}
