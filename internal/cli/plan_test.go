package cli

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/scenario"
)

// Every entry point builds its run through harness.NewPlan from the one
// set of defaults: a default changed there changes run's flags, a
// scenario and client check alike (locktest's own test shows the same of
// locktest.Options), and the pause follows the lease the backend grants.
func TestEntryPointsTakeTheDefaultsOfThePlan(t *testing.T) {
	saved := harness.Defaults
	t.Cleanup(func() { harness.Defaults = saved })
	harness.Defaults.Run.Keys = 2
	harness.Defaults.Think = "7ms"

	cmd, p := runCommand()
	require.NoError(t, cmd.ParseFlags([]string{"--seed", "1", "--nemesis", "none"}))
	require.NoError(t, p.plan(cmd))

	f, err := scenario.Parse("plan.yaml", []byte("name: plan\nbackend: zookeeper\nttl: 100ms\n"))
	require.NoError(t, err)
	fromScenario, err := f.Plan(t.TempDir(), catalog.Programs{}, nil)
	require.NoError(t, err)

	b, err := catalog.ClientTarget("plan-client", catalog.ClientProgram{Command: []string{"/usr/bin/python3", "lock.py"}, Topology: "redis"})
	require.NoError(t, err)
	fromCheck, err := harness.NewPlan(clientCheckRequest(b, 300*time.Millisecond, time.Second, catalog.Programs{}))
	require.NoError(t, err)

	for name, cfg := range map[string]harness.Config{"run": p.cfg, "scenario": fromScenario, "client check": fromCheck} {
		assert.Equal(t, 2, cfg.Run.Keys, "%s: keys", name)
		if name != "client check" { // it thinks for no time, on purpose
			assert.Equal(t, "7ms", cfg.Think, "%s: think", name)
			assert.Equal(t, "7ms", cfg.Run.Think, "%s: the header's think", name)
		}
		assert.Equal(t, 2*cfg.Lease, cfg.Pause, "%s: the pause outlasts the lease granted", name)
	}
	// ZooKeeper grants no session shorter than 2 ticks (of 100ms): the
	// scenario's 100ms TTL is a 200ms lease, and its pause twice that.
	assert.Equal(t, 200*time.Millisecond, fromScenario.Lease)
	assert.Equal(t, 400*time.Millisecond, fromScenario.Pause)
}

// The time between faults is the pause and a second, unless a run is too
// short for a step that starts then to end within it: then the one step
// it has room for starts and ends inside the run (a 70s pause, to outlast
// a library's 60s lease, in a 90s run).
func TestDefaultIntervalLeavesRoomForOnePause(t *testing.T) {
	tests := []struct {
		name         string
		args         []string
		wantInterval time.Duration
	}{
		{"the default run", nil, 2 * time.Second},
		{"a pause that fits after pause plus a second", []string{"--pause", "2s", "--time-limit", "20s"}, 3 * time.Second},
		{"a 70s pause in 90s", []string{"--pause", "70s", "--time-limit", "90s"}, 10 * time.Second},
		{"a given interval is kept", []string{"--pause", "70s", "--time-limit", "90s", "--nemesis-interval", "30s"}, 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, p := runCommand()
			require.NoError(t, cmd.ParseFlags(append([]string{"--seed", "1", "--nemesis", "pause-holder"}, tt.args...)))
			require.NoError(t, p.plan(cmd))
			assert.Equal(t, tt.wantInterval, p.cfg.Interval)
			if !slices.Contains(tt.args, "--nemesis-interval") {
				assert.LessOrEqual(t, p.cfg.Interval+p.cfg.Pause, p.cfg.Limit, "the first pause ends within the run")
			}
		})
	}
}
