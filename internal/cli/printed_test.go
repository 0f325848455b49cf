package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/nemesis"
	"github.com/lockcheck/lockcheck/results"
	"github.com/lockcheck/lockcheck/scenario"
	"github.com/lockcheck/lockcheck/scenario/repro"
)

// parsed is what lockcheck made of a command line: the run it would start
// (for lockcheck run) and the comparison's cells (for compare).
type parsed struct {
	run   *plannedRun
	cmp   *compareFlags
	sweep *sweepFlags
	found *cobra.Command
}

// execPrinted runs line, a command line as lockcheck printed it, through a
// shell's word splitting and lockcheck's own command line: the cobra
// parser, the argument checks and each command's planning (its PreRunE:
// the configuration, the preflight), stopping before anything would run.
func execPrinted(t *testing.T, line string) (parsed, error) {
	t.Helper()
	out, err := exec.Command("sh", "-c", "set -- "+line+`; for a; do printf '%s\0' "$a"; done`).Output()
	require.NoError(t, err)
	words := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	require.Equal(t, "lockcheck", words[0], line)
	args := words[1:]

	var p parsed
	root := newRootCmd()
	runCmd, run := runCommand()
	cmpCmd, cmp := compareCommand()
	sweepCmd, sweep := sweepCommand()
	for _, c := range root.Commands() {
		if c.Name() == "run" || c.Name() == "compare" || c.Name() == "sweep" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(runCmd, cmpCmd, sweepCmd)
	p.run, p.cmp, p.sweep = run, cmp, sweep
	found, _, err := root.Find(args)
	require.NoError(t, err, line)
	found.RunE = func(*cobra.Command, []string) error { return nil }
	p.found = found
	root.SetArgs(args)
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	return p, root.Execute()
}

// TestPrintedCommandsRun executes every kind of command line lockcheck
// prints for a user to run (a run's reproduce line in the report and
// repro.yaml's source, compare's and each cell's, the repro and minimal
// scenario's rerun line, a scenario run's own) and checks that lockcheck
// accepts it and that it repeats what was run.
func TestPrintedCommandsRun(t *testing.T) {
	testtier.Long(t)
	tests := []struct {
		name  string
		given string
		check func(t *testing.T, first, again harness.Config)
	}{
		{"a flag without a value, a list, durations",
			"lockcheck run --backend redlock --nemesis pause-node,kill-restart,clock-skew --wipe --ttl 1s --time-limit 30s --seed 7",
			func(t *testing.T, first, again harness.Config) {
				assert.Equal(t, "true", again.Run.Params[nemesis.ParamWipe])
				assert.Equal(t, []string{"pause-node", "kill-restart", "clock-skew"}, again.Run.Nemesis)
				assert.Equal(t, first.TTL, again.TTL)
				assert.Equal(t, first.Limit, again.Limit)
				assert.Equal(t, int64(7), again.Run.Seed)
			}},
		{"a flag without a value set false, a picked seed",
			"lockcheck run --backend redis --nemesis kill-restart --wipe=false --restart-delay 1.5s",
			func(t *testing.T, first, again harness.Config) {
				assert.Equal(t, "false", again.Run.Params[nemesis.ParamWipe])
				assert.Equal(t, "1.5s", again.Run.Params[nemesis.ParamRestartDelay])
				assert.Equal(t, first.Run.Seed, again.Run.Seed, "the seed lockcheck picked is printed")
			}},
		{"addresses of a running service",
			"lockcheck run --backend redis --addr 127.0.0.1:6379,127.0.0.1:6380 --nemesis pause-holder --seed 1",
			func(t *testing.T, first, again harness.Config) {
				assert.Equal(t, []string{"127.0.0.1:6379", "127.0.0.1:6380"}, again.Addrs)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := execPrinted(t, tt.given)
			require.NoError(t, err)
			first := p.run.cfg
			printed := map[string]string{"report": results.RerunCommand(first.Run)}
			f := repro.FromRun("run-1", &history.History{Header: history.Header{Config: first.Run}}, &checker.Result{Valid: checker.Invalid})
			printed["repro.yaml source"] = f.Source
			for what, line := range printed {
				again, err := execPrinted(t, line)
				require.NoError(t, err, "%s prints %s", what, line)
				assert.Equal(t, first.Run.CommandLine, again.run.cfg.Run.CommandLine, "%s: the printed line prints itself", what)
				tt.check(t, first, again.run.cfg)
			}
		})
	}
}

// TestPrintedCompareCommandsRun checks compare's command line and each
// cell's, which keeps the fence source compare chose for the cell.
func TestPrintedCompareCommandsRun(t *testing.T) {
	testtier.Long(t)
	p, err := execPrinted(t, "lockcheck compare --backends redis,mariadb --workloads fenced --nemesis kill-restart --wipe --ttl 1s --time-limit 3s --shard 1/1 --seed 3")
	require.NoError(t, err)
	again, err := execPrinted(t, results.RerunCommand(history.RunConfig{CommandLine: reproduce(p.found, p.cmp.run.seed)}))
	require.NoError(t, err, "compare's own line")
	require.Len(t, again.cmp.cells, len(p.cmp.cells))
	require.Len(t, p.cmp.cells, 2)
	for _, c := range p.cmp.cells {
		line := results.RerunCommand(c.cfg.Run)
		cell, err := execPrinted(t, line)
		require.NoError(t, err, line)
		assert.Equal(t, c.cfg.Run.FenceSource, cell.run.cfg.Run.FenceSource, line)
		assert.Equal(t, "true", cell.run.cfg.Run.Params[nemesis.ParamWipe], line)
		assert.Equal(t, c.cfg.TTL, cell.run.cfg.TTL, line)
	}
	assert.Equal(t, "resource", p.cmp.cells[1].cfg.Run.FenceSource, "GET_LOCK hands out no fence of its own")
}

// TestPrintedSweepCommandsRun checks sweep's command line and each run's,
// which repeats its cell's TTL, pause distribution, work time and skew.
func TestPrintedSweepCommandsRun(t *testing.T) {
	testtier.Long(t)
	gc := filepath.Join(t.TempDir(), "gc pauses.txt")
	require.NoError(t, os.WriteFile(gc, []byte("12\n40\n900\n"), 0o644))
	p, err := execPrinted(t, "lockcheck sweep --backends redlock --workload unfenced,fenced --nemesis clock-pause --ttl 1s,2s --pause 100ms-900ms,'@"+gc+"' --think 400ms-1200ms --skew 2s --seeds 2 --time-limit 3s --seed 3")
	require.NoError(t, err)
	again, err := execPrinted(t, results.RerunCommand(history.RunConfig{CommandLine: reproduce(p.found, p.sweep.run.seed)}))
	require.NoError(t, err, "sweep's own line")
	require.Len(t, again.sweep.runs, len(p.sweep.runs))
	require.Len(t, p.sweep.runs, 2*2*2*2)
	for _, r := range p.sweep.runs {
		line := results.RerunCommand(r.cfg.Run)
		cell, err := execPrinted(t, line)
		require.NoError(t, err, line)
		got := cell.run.cfg
		assert.Equal(t, r.cfg.TTL, got.TTL, line)
		assert.Equal(t, r.cfg.Pause, got.Pause, line)
		assert.Equal(t, r.cfg.Pauses, got.Pauses, line)
		assert.Equal(t, r.cfg.Think, got.Think, line)
		assert.Equal(t, "2s", got.Run.Params[nemesis.ParamSkew], line)
		assert.Equal(t, r.Seed, got.Run.Seed, line)
		assert.Equal(t, r.cfg.Run.FenceSource, got.Run.FenceSource, line)
	}
}

// TestPrintedScenarioCommandsRun checks the line that reruns a
// reproduction (the summary's, scenario run's, shrink's) and the one a
// scenario run's report prints, from a path a shell must quote.
func TestPrintedScenarioCommandsRun(t *testing.T) {
	testtier.Long(t)
	dir := filepath.Join(t.TempDir(), "run dir")
	require.NoError(t, os.Mkdir(dir, 0o755))
	f := &scenario.File{Name: "repro-x", Backend: "redis", TTL: scenario.Duration(500e6), Clients: 2, TimeLimit: scenario.Duration(3e9),
		Timeline: []scenario.Step{{At: scenario.Duration(1e9), Do: "pause", Target: "c0", For: scenario.Duration(1e9)}},
		Expect:   scenario.Expect{Verdict: "false", Fail: []string{"lease_safety"}}}
	data, err := f.Marshal()
	require.NoError(t, err)
	path := filepath.Join(dir, results.ReproFile)
	require.NoError(t, os.WriteFile(path, data, 0o644))

	_, err = execPrinted(t, results.ReproCommand(path))
	require.NoError(t, err, "the rerun line")
	read, err := scenario.ReadFile(path)
	require.NoError(t, err)
	_, err = execPrinted(t, results.RerunCommand(read.Config(t.TempDir(), nil, nil).Run))
	require.NoError(t, err, "a scenario run's report")
}
