package lockcheck_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The example modules are modules of their own (each with a replace to this
// repository), so go test ./... here does not reach them: this test builds
// each one as a user would and runs its scenarios against a real
// redis-server.
func TestExampleRedisLock(t *testing.T) {
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
		file, verdict string
	}{
		// The GET-then-DEL release deletes the next holder's key: the
		// scenario expects false with lease-safety violations.
		{"get-del-race.yaml", "verdict false"},
		// The compare-and-delete release under the same timeline: true.
		{"lua-release.yaml", "verdict true"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			run := exec.Command(bin, "scenario", "run", "--file", tc.file, "--out", t.TempDir())
			run.Dir = dir
			out, err := run.CombinedOutput()
			require.NoError(t, err, "the scenario's expectations were not met:\n%s", out)
			assert.Contains(t, string(out), "PASS  ("+tc.verdict)
		})
	}
}
