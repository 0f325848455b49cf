package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
	"github.com/lockcheck/lockcheck/scenario"
	"github.com/lockcheck/lockcheck/scenario/repro"
)

func TestFailingRunWritesAReproThatFailsTheSameChecks(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	inv, res, dir := runLockcheck(t, "--workload", "unfenced", "--nemesis", "pause-holder", "--clients", "3", "--ttl", "500ms", "--time-limit", "8s")
	require.Equal(t, exitInvalid, inv.code, inv.stdout)
	path := filepath.Join(dir, results.ReproFile)
	require.FileExists(t, path)
	assert.Contains(t, inv.stdout, "repro: lockcheck scenario run --file "+path)
	report, err := os.ReadFile(filepath.Join(dir, results.ReportFile))
	require.NoError(t, err)
	assert.Contains(t, string(report), `href="repro.yaml"`, "the report links the reproduction")

	f := readScenarioFile(t, path)
	failed := repro.FailedChecks(res.Config.Fenced(), &res.Checks)
	assert.ElementsMatch(t, failed, f.Expect.Fail)
	assert.Equal(t, ">= 1", f.Expect.Landed, "a replayed fault may miss its moment; the failure is what must come back")
	require.NotEmpty(t, f.Timeline)
	for _, s := range f.Timeline {
		require.NotNil(t, s.When, "pause-holder is aimed at the lease-check failpoint: %+v", s)
		assert.Equal(t, "before-write", s.When.Reaches)
	}

	// On a loaded machine the rerun's interleaving differs; what must come
	// back is what a holder paused past its lease right after its lease
	// check shows: another client granted the lock meanwhile, and the
	// paused one's write accepted late.
	again, _, rerun := runScenarioFile(t, path, t.TempDir())
	require.Positive(t, rerun.FaultLanding.Landed, "a replayed pause met its client: %s", again.stdout)
	assert.Equal(t, checker.Invalid, rerun.Valid, again.stdout)
	assert.Positive(t, rerun.Checks.DoubleOwnership.Windows, "two clients believed they held the lock")
	assert.Positive(t, rerun.Checks.Resource.StaleWritesAccepted, "the paused holder's late write was accepted")
	if again.code != 0 {
		t.Logf("the rerun did not fail exactly the same checks on this machine:\n%s", again.stdout)
	}
}

// runScenarioFile runs the scenario in file into store and reads the
// results of its run directory.
func runScenarioFile(t *testing.T, file, store string) (invocation, string, *results.Results) {
	t.Helper()
	inv := lockcheck("scenario", "run", "--file", file, "--out", store)
	require.NotEqual(t, exitUnknown, inv.code, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
	dir, err := results.OpenRunDir(filepath.Join(store, "latest"))
	require.NoError(t, err)
	res, err := results.ReadResults(dir)
	require.NoError(t, err)
	return inv, dir, res
}

func readScenarioFile(t *testing.T, path string) *scenario.File {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := scenario.Parse(path, data)
	require.NoError(t, err, "%s", data)
	return f
}

func TestPassingRunWritesNoRepro(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	inv, _, dir := runLockcheck(t, "--workload", "fenced", "--nemesis", "pause-holder", "--ttl", "500ms", "--time-limit", "5s")
	require.Equal(t, exitValid, inv.code, inv.stdout)
	assert.NoFileExists(t, filepath.Join(dir, results.ReproFile))
	assert.NotContains(t, inv.stdout, "repro:")

	refused := lockcheck("shrink", dir)
	assert.Equal(t, exitUnknown, refused.code)
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(refused.stderr), "\n")+1, "one line: %s", refused.stderr)
	assert.Contains(t, refused.stderr, "ended true")
}

// twoSteps is a failure of two steps of which one, the holder's pause past
// its TTL right after its lease check, is the whole story.
const twoSteps = `name: two-steps
backend: redis
workload: unfenced
ttl: 300ms
clients: 3
time_limit: 4s
timeline:
  - at: 100ms
    do: pause
    target: c2
    for: 20ms
  - at: 500ms
    when: {client: c1, reaches: before-write}
    do: pause
    target: c1
    for: 900ms
expect:
  verdict: "false"
  fail: [resource]
`

func TestFailingScenarioRunWritesTheScenarioAsRun(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "incident.yaml")
	require.NoError(t, os.WriteFile(file, []byte(twoSteps), 0o644))
	inv, runDir, res := runScenarioFile(t, file, filepath.Join(dir, "store"))
	require.Equal(t, checker.Invalid, res.Valid, "the holder paused past its lease breaks the lock: %s", inv.stdout)

	path := filepath.Join(runDir, results.ReproFile)
	assert.Contains(t, inv.stdout, "repro: lockcheck scenario run --file "+path)
	f := readScenarioFile(t, path)
	want := readScenarioFile(t, file)
	assert.Equal(t, want.Timeline, f.Timeline, "the timeline as run")
	assert.Equal(t, "repro-two-steps", f.Name)
	assert.ElementsMatch(t, repro.FailedChecks(res.Config.Fenced(), &res.Checks), f.Expect.Fail)
	report, err := os.ReadFile(filepath.Join(runDir, results.ReportFile))
	require.NoError(t, err)
	assert.Contains(t, string(report), `href="repro.yaml"`, "the report links the reproduction")
}

func TestShrinkLeavesTheStepThatBreaksTheLock(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "incident.yaml")
	require.NoError(t, os.WriteFile(file, []byte(twoSteps), 0o644))
	inv := lockcheck("scenario", "shrink", file, "--tries", "2", "--budget", "3m")
	require.Equal(t, 0, inv.code, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
	assert.Contains(t, inv.stdout, "keep  drop step 1 (pause c2")
	m := readScenarioFile(t, filepath.Join(dir, MinimalFile))
	require.Len(t, m.Timeline, 1, "%+v", m)
	assert.Equal(t, "pause", m.Timeline[0].Do)
	assert.NotNil(t, m.Timeline[0].When)
	assert.Equal(t, []string{"resource"}, m.Expect.Fail)
	assert.Regexp(t, `^The scenario shrink started from \(2 steps, 3 clients, 4s\) failed resource in [12] of 2 replays\. This one \(1 step, `, m.Explain)
	// The write-up says the step in the articles' terms.
	assert.Regexp(t, `The timeline is one pause of c[01] for`, m.Explain)
	assert.Contains(t, m.Explain, "when it reaches before-write (right after its lease check, before its write)")
	// How short a pause still breaks the lock follows the machine: on a
	// busy one a client stalls past its lease after a shorter pause. The
	// write-up says how the pause compares with the lease.
	if m.Timeline[0].For.D() > 300*time.Millisecond {
		assert.Contains(t, m.Explain, "longer than its 300ms lease")
	} else {
		assert.NotContains(t, m.Explain, "longer than its")
	}
	t.Logf("shrink:\n%s", inv.stdout)
}

// A scenario that does not fail as it expects is no failure to shrink:
// shrink says its replay rate in one line and writes nothing.
func TestShrinkRefusesAScenarioThatDoesNotReproduce(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "incident.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`name: holds
backend: redis
ttl: 300ms
clients: 2
time_limit: 1s
expect: {verdict: "false", fail: [lease_safety]}
`), 0o644))
	inv := lockcheck("scenario", "shrink", file, "--tries", "2")
	assert.Equal(t, exitUnknown, inv.code, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(inv.stderr), "\n")+1, "one line: %s", inv.stderr)
	assert.Contains(t, inv.stderr, "reproduced in 0 of 2 replays")
	assert.Contains(t, inv.stderr, "missed the moment")
	assert.NoFileExists(t, filepath.Join(dir, MinimalFile))
}
