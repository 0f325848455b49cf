package lockcheck_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/internal/testtier"
)

// The example modules are modules of their own (each with a replace to this
// repository), so go test ./... here does not reach them: this test builds
// each one as a user would and runs its scenarios against a real
// redis-server. It asserts on what the checker found in each run
// (results.json), not on the scenario's exit code: how much else a busy
// machine lets happen in a run is not the example's point.
func TestExampleRedisLock(t *testing.T) {
	testtier.Long(t)
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not on PATH (run scripts/setup)")
	}
	dir := filepath.Join("examples", "redislock")
	bin := filepath.Join(t.TempDir(), "redislock")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building the example: %s", out)

	for _, tc := range []struct {
		file string
		// broken: the release deletes the next holder's key, and the
		// checker finds a grant inside a live lease.
		broken bool
	}{
		{"get-del-race.yaml", true},
		{"lua-release.yaml", false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			store := t.TempDir()
			run := exec.Command(bin, "scenario", "run", "--file", tc.file, "--out", store)
			run.Dir = dir
			out, err := run.CombinedOutput()
			var exit *exec.ExitError
			if err != nil && !assert.ErrorAs(t, err, &exit) {
				return
			}
			raw, err := os.ReadFile(filepath.Join(store, "latest", "results.json"))
			require.NoError(t, err, "the run left no results:\n%s", out)
			var res struct {
				Valid  any `json:"valid"`
				Checks struct {
					LeaseSafety struct {
						Violations int `json:"violations"`
					} `json:"lease_safety"`
				} `json:"checks"`
				FaultLanding struct {
					Injected int `json:"injected"`
					Landed   int `json:"landed"`
				} `json:"fault_landing"`
			}
			require.NoError(t, json.Unmarshal(raw, &res))
			require.Positive(t, res.FaultLanding.Injected, "the scenario's steps ran:\n%s", out)
			require.Equal(t, res.FaultLanding.Injected, res.FaultLanding.Landed, "the pause at before-delete and the resume once c1 holds the lock landed:\n%s", out)
			if tc.broken {
				assert.Equal(t, false, res.Valid, "%s", out)
				assert.GreaterOrEqual(t, res.Checks.LeaseSafety.Violations, 1, "%s", out)
			} else {
				assert.Zero(t, res.Checks.LeaseSafety.Violations, "%s", out)
			}
		})
	}
}
