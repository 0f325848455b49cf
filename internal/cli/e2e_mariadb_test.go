package cli

import (
	"context"
	"database/sql"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/mariadb"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/internal/testtier"
)

func requireMariaDB(t *testing.T) {
	t.Helper()
	if _, err := mariadb.Server.Find(mariadb.Server.Name); err != nil {
		t.Fatalf("MariaDB is not installed (run scripts/setup): %v", err)
	}
}

// noMariaDBLeft fails if a process of the runs in store still runs.
func noMariaDBLeft(t *testing.T, store string) {
	t.Helper()
	assert.Eventually(t, func() bool { return len(processesUsing(store)) == 0 }, 20*time.Second, 100*time.Millisecond,
		"nothing outlives lockcheck: %v", processesUsing(store))
	for _, p := range processesNamed("mariadbd") {
		assert.NotContains(t, p, store, "a mariadbd of the run outlived it")
	}
}

// GET_LOCK on a real MariaDB started by lockcheck: no fault keeps it
// safe; a killed session frees the lock under its holder, which writes
// on, and MariaDB kept its promise (lease safety holds).
func TestMariaDBGetLock(t *testing.T) {
	t.Parallel()
	requireMariaDB(t)
	tests := []struct {
		name  string
		args  []string
		valid checker.Validity
	}{
		{"no fault", []string{"--nemesis", "none"}, checker.Valid},
		{"kill-session, unfenced", []string{"--nemesis", "kill-session", "--workload", "unfenced", "--pause", "1s"}, checker.Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, res, dir := runLockcheck(t, append([]string{"--backend", "mariadb", "--time-limit", "6s"}, tt.args...)...)
			assert.Equal(t, tt.valid, res.Valid, inv.stdout)
			assert.Zero(t, res.Checks.LeaseSafety.Violations, "MariaDB keeps its promise: %s", res.Reason)
			if tt.valid == checker.Invalid {
				assert.Positive(t, res.Checks.DoubleOwnership.UnsafeWrites, "the killed client wrote on")
			}
			noMariaDBLeft(t, dir)
		})
	}
}

// A run against a MariaDB lockcheck did not start (--addr) kills the
// sessions it left holding its keys (a client killed in its critical
// section holds its lock until the server notices).
func TestMariaDBAddrCleansWhatTheRunLeft(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	requireMariaDB(t)
	_, _, addrs := startByHand(t, "mariadb")
	inv, res, _, _ := runFault(t, "--backend", "mariadb", "--addr", addrs[0], "--nemesis", "pause-holder,kill-client", "--time-limit", "6s")
	assert.Positive(t, res.Checks.Liveness.Grants, "the clients were served: %s", inv.stdout)
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = mariadb.User, "tcp", addrs[0]
	c, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	db := sql.OpenDB(c)
	defer db.Close()
	var holder sql.NullInt64
	require.NoError(t, db.QueryRowContext(context.Background(), `SELECT IS_USED_LOCK(?)`, res.Config.Params["key_prefix"]+"lock-0").Scan(&holder))
	assert.False(t, holder.Valid, "the run left its lock held by connection %d: %s", holder.Int64, inv.stderr)
}

// A run stopped by SIGINT or killed by SIGKILL leaves no mariadbd or
// worker process behind.
func TestMariaDBInterruptedRunLeavesNothing(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	requireMariaDB(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			store := t.TempDir()
			cmd, _, _ := lockcheckProcess(t, "run", "--out", store, "--backend", "mariadb", "--nemesis", "none", "--time-limit", "5m")
			waitForGrants(t, store)
			require.NoError(t, cmd.Process.Signal(sig))
			exitCode(t, cmd)
			noMariaDBLeft(t, store)
		})
	}
}

// --wait-timeout is MariaDB's and whole seconds.
func TestMariaDBBadInput(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend", "mariadb", "--wait-timeout", "1500ms"}, "whole number of seconds"},
		{[]string{"--backend", "redis", "--wait-timeout", "2s"}, "--wait-timeout applies to the mariadb topology only, and this run's is redis"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			inv := lockcheck(append([]string{"run", "--out", t.TempDir()}, tt.args...)...)
			assert.Equal(t, exitUnknown, inv.code)
			assert.Contains(t, inv.stderr, tt.want)
		})
	}
}
