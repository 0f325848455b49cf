package locktest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck"
	"github.com/lockcheck/lockcheck/harness"
)

// locktest.Options are mapped into the run's request: what they leave
// zero is harness.Defaults, as for run, a scenario and client check
// (internal/cli's TestEntryPointsTakeTheDefaultsOfThePlan).
func TestOptionsTakeTheDefaultsOfThePlan(t *testing.T) {
	saved := harness.Defaults
	t.Cleanup(func() { harness.Defaults = saved })
	harness.Defaults.Run.Keys = 2
	harness.Defaults.Think = "7ms"
	open := func(lockcheck.Config) (lockcheck.Lock, error) { return nil, nil }
	cfg, _, err := Options{InProcess: true}.config("plan-defaults", t.TempDir(), open)
	require.NoError(t, err)
	assert.Equal(t, 2, cfg.Run.Keys)
	assert.Equal(t, "7ms", cfg.Think)
	assert.Equal(t, 2*cfg.Lease, cfg.Pause, "the pause outlasts the lease granted")
	assert.Equal(t, int64(1), cfg.Run.Seed, "a test's seed is 1 unless it says otherwise")
}
