package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/results"
	"github.com/lockcheck/lockcheck/scenario"
	"github.com/lockcheck/lockcheck/scenario/repro"
)

func TestFailingRunWritesAReproThatFailsTheSameChecks(t *testing.T) {
	t.Parallel()
	inv, res, dir := runLockcheck(t, "--workload", "unfenced", "--nemesis", "pause-holder", "--clients", "3", "--ttl", "500ms", "--time-limit", "8s")
	require.Equal(t, exitInvalid, inv.code, inv.stdout)
	path := filepath.Join(dir, results.ReproFile)
	require.FileExists(t, path)
	assert.Contains(t, inv.stdout, "repro: lockcheck scenario run --file "+path)
	report, err := os.ReadFile(filepath.Join(dir, results.ReportFile))
	require.NoError(t, err)
	assert.Contains(t, string(report), `href="repro.yaml"`, "the report links the reproduction")

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := scenario.Parse(path, data)
	require.NoError(t, err)
	failed := repro.FailedChecks(res.Config.Fenced(), &res.Checks)
	assert.ElementsMatch(t, failed, f.Expect.Fail)
	require.NotEmpty(t, f.Timeline)
	for _, s := range f.Timeline {
		require.NotNil(t, s.When, "pause-holder is aimed at the lease-check failpoint: %+v", s)
		assert.Equal(t, "before-write", s.When.Reaches)
	}

	again := lockcheck("scenario", "run", "--file", path, "--out", t.TempDir())
	assert.Equal(t, 0, again.code, "the reproduction fails the same checks:\n%s\n%s", again.stdout, again.stderr)
}

func TestPassingRunWritesNoRepro(t *testing.T) {
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

func TestShrinkLeavesTheStepThatBreaksTheLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "incident.yaml")
	require.NoError(t, os.WriteFile(file, []byte(twoSteps), 0o644))
	inv := lockcheck("shrink", file, "--tries", "2", "--budget", "3m")
	require.Equal(t, 0, inv.code, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
	assert.Contains(t, inv.stdout, "keep  drop step 1 (pause c2")
	data, err := os.ReadFile(filepath.Join(dir, MinimalFile))
	require.NoError(t, err)
	m, err := scenario.Parse(MinimalFile, data)
	require.NoError(t, err)
	require.Len(t, m.Timeline, 1, "%s", data)
	assert.Equal(t, "pause", m.Timeline[0].Do)
	assert.NotNil(t, m.Timeline[0].When)
	assert.Equal(t, []string{"resource"}, m.Expect.Fail)
	assert.Contains(t, m.Explain, "Shrunk from 2 steps")
	t.Logf("shrink:\n%s", inv.stdout)
}
