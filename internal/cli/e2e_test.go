package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
)

// Runs start workers and the nodes that are lockcheck itself (etcd members,
// ZooKeeper launchers) by running their own executable: in
// tests that is the test binary, which becomes one here.
func TestMain(m *testing.M) {
	if harness.RunWorkerFromEnv() || catalog.RunNodeFromEnv() {
		return
	}
	if os.Getenv(mainEnv) == "1" { // lockcheck as a process of its own, for tests that signal it
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

type invocation struct {
	code           int
	stdout, stderr string
}

func lockcheck(args ...string) invocation {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return invocation{code, out.String(), errb.String()}
}

// runLockcheck runs lockcheck run into a fresh store and returns the invocation
// and the results it wrote.
func runLockcheck(t *testing.T, args ...string) (invocation, *results.Results, string) {
	t.Helper()
	inv, res, dir := runMayMiss(t, args...)
	require.NotEqual(t, exitUnknown, inv.code, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
	return inv, res, dir
}

// runFault runs a fault that may miss its moment on a slow or busy machine
// (a restart slower than the lease). It reports whether any fault landed;
// when none did, it checks that the run said so honestly: verdict unknown,
// exit 2, the miss in the reason. A test then asserts the checker's
// findings only for a fault that landed.
func runFault(t *testing.T, args ...string) (invocation, *results.Results, string, bool) {
	t.Helper()
	inv, res, dir := runMayMiss(t, args...)
	require.Positive(t, res.FaultLanding.Injected, "the nemesis injected no fault: %s", inv.stdout)
	if res.FaultLanding.Landed > 0 {
		return inv, res, dir, true
	}
	if res.Valid != checker.Invalid {
		assert.Equal(t, exitUnknown, inv.code, "no fault landed, so the verdict is unknown: %s", inv.stdout)
		assert.Contains(t, res.Reason, "No fault landed", "the reason says no fault landed")
	}
	t.Logf("no fault landed on this machine: %s", res.FaultLanding.Missed)
	if strings.Contains(res.FaultLanding.Missed, "came back") {
		assert.Contains(t, res.Reason, "--ttl of at least", "a split that missed for a slow restart names the TTL that would do")
	}
	return inv, res, dir, false
}

// runMayMiss runs lockcheck and reads the results, whatever the verdict.
func runMayMiss(t *testing.T, args ...string) (invocation, *results.Results, string) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed (run scripts/setup): %v", err)
	}
	store := t.TempDir()
	inv := lockcheck(append([]string{"run", "--out", store, "--seed", "1"}, args...)...)
	dir, err := results.OpenRunDir(filepath.Join(store, "latest"))
	require.NoError(t, err, "no run recorded: stderr:\n%s", inv.stderr)
	res, err := results.ReadResults(dir)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(inv.stdout), "\n")
	assert.Equal(t, "report: "+filepath.Join(dir, "report.html"), lines[len(lines)-1], "the summary ends with the report's path")
	return inv, res, dir
}

func TestUnfencedPausedHolderLosesUpdates(t *testing.T) {
	t.Parallel()
	inv, res, dir := runLockcheck(t, "--workload", "unfenced", "--nemesis", "pause-holder", "--ttl", "500ms", "--time-limit", "10s")
	assert.Equal(t, exitInvalid, inv.code)
	assert.Equal(t, checker.Invalid, res.Valid)
	c := res.Checks
	assert.GreaterOrEqual(t, c.DoubleOwnership.Windows, 1)
	assert.GreaterOrEqual(t, c.Resource.LostUpdates, 1)
	assert.Zero(t, c.LeaseSafety.Violations, "a paused client does not make the service break its promise")

	assertCheckAgrees(t, dir, res, exitInvalid)
}

// assertCheckAgrees checks that lockcheck check of a run directory exits
// with exit and reproduces the run's verdict and counts from the stored
// history; it returns the results the check wrote.
func assertCheckAgrees(t *testing.T, dir string, res *results.Results, exit int) *results.Results {
	t.Helper()
	again := lockcheck("check", dir)
	assert.Equal(t, exit, again.code, again.stderr)
	res2, err := results.ReadResults(dir)
	require.NoError(t, err)
	assert.Equal(t, res.Valid, res2.Valid)
	assert.Equal(t, res.Checks, res2.Checks)
	return res2
}

func TestFencedPausedHolderIsRefused(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	inv, res, _ := runLockcheck(t, "--workload", "fenced", "--nemesis", "pause-holder", "--ttl", "500ms", "--time-limit", "10s")
	assert.Equal(t, exitValid, inv.code, inv.stdout)
	c := res.Checks.Resource
	assert.GreaterOrEqual(t, c.StaleWritesRefused, 1)
	assert.Zero(t, c.LostUpdates)
	assert.Zero(t, c.StaleWritesAccepted)
	assert.Equal(t, "ok", res.Checks.Linearizability.Result)
}

func TestCorrectLockWithoutFaultsIsClean(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	inv, res, _ := runLockcheck(t, "--variant", "correct", "--nemesis", "none", "--ttl", "2s", "--time-limit", "6s")
	assert.Equal(t, exitValid, inv.code, inv.stdout)
	c := res.Checks
	assert.Zero(t, c.LeaseSafety.Violations)
	assert.Zero(t, c.DoubleOwnership.Windows)
	assert.Zero(t, c.Resource.LostUpdates+c.Resource.StaleWritesAccepted+c.Resource.StaleWritesRefused)
	assert.Zero(t, c.Fencing.Regressions+c.Fencing.Duplicates)
	assert.True(t, c.Fencing.Checked)
	assert.Equal(t, "ok", c.Linearizability.Result)
	assert.Positive(t, c.Liveness.Grants)
}

func TestDelReleaseDeletesAnotherClientsLock(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	inv, res, _ := runLockcheck(t, "--variant", "del-release", "--nemesis", "pause-holder", "--time-limit", "8s")
	assert.Equal(t, exitInvalid, inv.code)
	assert.GreaterOrEqual(t, res.Checks.LeaseSafety.Violations, 1)
}

// A client killed between SETNX and EXPIRE leaves a key nobody can take:
// the lock is orphaned, and the verdict is false.
func TestSetnxExpireKilledClientLeavesLockStuck(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	inv, res, dir := runLockcheck(t, "--variant", "setnx-expire", "--nemesis", "kill-client", "--time-limit", "8s")
	l := res.Checks.Liveness
	assert.Equal(t, exitInvalid, inv.code, inv.stdout)
	assert.True(t, l.StuckUntilEnd, inv.stdout)
	assert.Equal(t, 1, l.Orphaned, inv.stdout)
	require.NotEmpty(t, l.Orphans)
	assert.Contains(t, l.Orphans[0].Reason, "between SETNX and EXPIRE")
	assert.Contains(t, l.Orphans[0].Reason, "no TTL")
	assert.Contains(t, res.Reason, "The lock was orphaned")
	report, err := os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, err)
	assert.Contains(t, string(report), "between SETNX and EXPIRE", "the report says why the lock is stuck")
}

func TestBadInputIsOneLineAndExitTwo(t *testing.T) {
	store := t.TempDir()
	notRun := t.TempDir()
	fenceless := filepath.Join(t.TempDir(), "fenced.yaml")
	require.NoError(t, os.WriteFile(fenceless, []byte("name: fenced-without-fences\nbackend: redis\nworkload: fenced\nfence_source: none\nttl: 300ms\nclients: 2\ntime_limit: 2s\nexpect:\n  verdict: \"true\"\n"), 0o644))
	malformed := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(malformed, "history.jsonl"),
		[]byte("{\"lockcheck_history\":1,\"start_time\":0,\"config\":{}}\n{\"index\":0,\"time\":1,\"process\":0,\"type\":\"invoke\",\"f\":\"acquire\"}\nnot json\n"), 0o644))
	tests := []badInput{
		{"unknown flag", []string{"run", "--bogus"}, "unknown flag: --bogus"},
		{"unknown backend", []string{"run", "--out", store, "--backend", "consul"}, `unknown backend "consul"`},
		{"unknown variant", []string{"run", "--out", store, "--variant", "nope"}, `no variant "nope"`},
		{"unknown nemesis", []string{"run", "--out", store, "--nemesis", "meteor"}, `unknown nemesis "meteor"`},
		{"unknown workload", []string{"run", "--out", store, "--workload", "maybe"}, `unknown workload "maybe"`},
		{"bad think", []string{"run", "--out", store, "--think", "soon"}, "--think"},
		{"fenced with no fence", []string{"run", "--out", store, "--workload", "fenced", "--fence-source", "none"}, "--workload fenced with --fence-source none: no write would carry a fence, and the resource would refuse every one; use --fence-source resource"},
		{"a fenced scenario with no fence", []string{"scenario", "run", "--out", store, "--file", fenceless}, "--workload fenced with --fence-source none"},
		{"missing redis-server", []string{"run", "--out", store, "--redis-server", "/nonexistent/redis-server"}, "/nonexistent/redis-server not found"},
		{"not a run directory", []string{"check", notRun}, "is not a lockcheck run directory"},
		{"malformed history", []string{"check", malformed}, "history.jsonl line 3"},
	}
	assertRefused(t, store, nil, tests)
}

// badInput is a command line lockcheck must refuse.
type badInput struct {
	name string
	args []string
	want string // in the error line
}

// assertRefused runs each bad command line (after prefix) and checks that it
// fails with exit 2 and one readable line naming the problem, and that it
// recorded nothing under store.
func assertRefused(t *testing.T, store string, prefix []string, tests []badInput) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := lockcheck(append(append([]string(nil), prefix...), tt.args...)...)
			assert.Equal(t, exitUnknown, inv.code)
			assert.Contains(t, inv.stderr, tt.want)
			assert.Equal(t, 1, strings.Count(strings.TrimSpace(inv.stderr), "\n")+1, "one line: %q", inv.stderr)
		})
	}
	entries, err := os.ReadDir(store)
	require.NoError(t, err)
	assert.Empty(t, entries, "bad input starts nothing and records nothing")
}
