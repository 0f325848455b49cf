package main

import (
	"os"
	"path/filepath"
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
}
