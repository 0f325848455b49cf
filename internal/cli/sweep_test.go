package cli

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/nemesis"
	"github.com/lockcheck/lockcheck/results"
	"github.com/lockcheck/lockcheck/workloads"
)

// planSweep lays out the runs sweep would do for args, without running any.
func planSweep(t *testing.T, args ...string) ([]sweepRun, int, error) {
	t.Helper()
	cmd, f := sweepCommand()
	require.NoError(t, cmd.ParseFlags(append([]string{"--seed", "7"}, args...)))
	return f.plan(cmd)
}

func TestSweepPlansTheGrid(t *testing.T) {
	runs, grid, err := planSweep(t, "--backends", "redis", "--workload", "unfenced,fenced", "--nemesis", "pause-holder",
		"--ttl", "250ms,1s", "--pause", "900ms,100ms-300ms", "--think", "20ms,400ms-1200ms", "--seeds", "3", "--time-limit", "4s")
	require.NoError(t, err)
	assert.Equal(t, 2*2*2*2*3, grid, "workloads × TTLs × pauses × work times × seeds")
	require.Len(t, runs, grid)
	cells := map[string][]int64{}
	for i, r := range runs {
		assert.Equal(t, i, r.At)
		cells[r.CellKey()] = append(cells[r.CellKey()], r.Seed)
		assert.Equal(t, r.Seed, r.cfg.Run.Seed)
		assert.Equal(t, 4*time.Second, r.cfg.Limit)
		assert.Equal(t, r.Settings.TTLms, r.cfg.TTL.Milliseconds())
		given, err := workloads.ParseDistribution(r.Settings.Think)
		require.NoError(t, err)
		assert.Equal(t, given.String(), r.cfg.Think, "the work time the workers draw from")
		switch r.Settings.Pause {
		case "900ms":
			assert.Equal(t, 900*time.Millisecond, r.cfg.Pause)
			assert.True(t, r.cfg.Pauses.Fixed())
		case "100ms-300ms":
			assert.Equal(t, 300*time.Millisecond, r.cfg.Pause, "the longest pause is what is waited out")
			assert.Equal(t, 100*time.Millisecond, r.cfg.Pauses.Min)
			assert.Equal(t, 1.3*float64(time.Second), float64(r.cfg.Interval), "faults the longest pause plus a second apart")
		default:
			t.Errorf("pause %q", r.Settings.Pause)
		}
		assert.Contains(t, r.cfg.Run.CommandLine, "--ttl")
	}
	assert.Len(t, cells, 16)
	for k, seeds := range cells {
		assert.Equal(t, []int64{7, 8, 9}, seeds, "%s: seeds S, S+1, S+2, together", k)
	}
	line := runs[0].cfg.Run.CommandLine
	assert.Equal(t, []string{"lockcheck", "run", "--backend", "redis", "--variant", "correct", "--workload", "unfenced", "--nemesis", "pause-holder",
		"--time-limit", "4s", "--ttl", "250ms", "--think", "20ms", "--pause", "900ms", "--seed", "7"}, line, "the run that repeats the cell")
}

// The shards of a grid are disjoint and together the whole.
func TestSweepShards(t *testing.T) {
	args := []string{"--nemesis", "none", "--ttl", "250ms,500ms,1s", "--workload", "unfenced", "--seeds", "2"}
	whole, grid, err := planSweep(t, args...)
	require.NoError(t, err)
	var ats []int
	for _, sh := range []string{"1/2", "2/2"} {
		runs, g, err := planSweep(t, append(args, "--shard", sh)...)
		require.NoError(t, err)
		assert.Equal(t, grid, g, "every shard knows the whole grid")
		for _, r := range runs {
			ats = append(ats, r.At)
			assert.Equal(t, whole[r.At].CellKey(), r.CellKey())
			assert.Equal(t, whole[r.At].Seed, r.Seed)
		}
	}
	assert.ElementsMatch(t, []int{0, 1, 2, 3, 4, 5}, ats)
	cmd, f := sweepCommand()
	require.NoError(t, cmd.ParseFlags([]string{"--shard", "1/2"}))
	_, _, err = f.plan(cmd)
	assert.ErrorContains(t, err, "--shard 1/2 needs --seed")
}

func TestSweepBadInput(t *testing.T) {
	gc := filepath.Join(t.TempDir(), "gc.txt")
	require.NoError(t, os.WriteFile(gc, []byte("3\n5\nslow\n"), 0o644))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ttl", "250ms,soon"}, `--ttl "soon": want durations of at least 1ms, comma-separated`},
		{[]string{"--ttl", "0s"}, `--ttl "0s": want durations of at least 1ms`},
		{[]string{"--ttl", "20s"}, `--ttl 20s: longer than --time-limit 10s`},
		{[]string{"--pause", "5ms"}, `--pause "5ms": must be at least 10ms`},
		{[]string{"--pause", "@" + gc}, gc + `:3: "slow" is not a duration in ms`},
		{[]string{"--think", "1s-10ms"}, `--think: "1s-10ms" is not a duration (20ms), a range (10ms-50ms) or @FILE`},
		{[]string{"--skew", "far"}, `--skew "far": want durations`},
		{[]string{"--seeds", "0"}, "--seeds 0: want at least 1 run per cell"},
		{[]string{"--workload", "careful"}, `--workload: --workloads: unknown workload "careful"`},
	} {
		_, _, err := planSweep(t, tc.args...)
		assert.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}

// A pause read from a file of measured durations is drawn from by each
// fault, and the sweep keeps its quantiles for the page; a skew is each
// cell's clock jump.
func TestSweepDistributionsAndSkew(t *testing.T) {
	gc := filepath.Join(t.TempDir(), "gc.txt")
	require.NoError(t, os.WriteFile(gc, []byte("12\n40\n310\n900\n"), 0o644))
	runs, _, err := planSweep(t, "--backends", "redis", "--workload", "unfenced", "--nemesis", "pause-holder", "--pause", "@"+gc, "--seeds", "1")
	require.NoError(t, err)
	require.Len(t, runs, 1)
	r := runs[0]
	assert.Equal(t, "@"+gc, r.Settings.Pause)
	require.NotNil(t, r.Settings.PauseQuantiles)
	assert.Equal(t, results.Quantiles{P0: 12, P50: 175, P90: 723, P99: 882.3, P100: 900}, roundQ(*r.Settings.PauseQuantiles))
	assert.False(t, r.cfg.Pauses.Fixed())
	assert.Equal(t, 900*time.Millisecond, r.cfg.Pause)
	assert.Contains(t, r.cfg.Run.CommandLine, "@"+gc, "the run's command line reads the same file")

	runs, _, err = planSweep(t, "--backends", "redlock", "--workload", "unfenced", "--nemesis", "clock-skew", "--skew", "2s,-20s", "--seeds", "1")
	require.NoError(t, err)
	require.Len(t, runs, 2)
	assert.Equal(t, "2s", runs[0].cfg.Run.Params[nemesis.ParamSkew])
	assert.Equal(t, "-20s", runs[1].cfg.Run.Params[nemesis.ParamSkew])
	assert.Equal(t, "-20s", runs[1].Settings.Skew)
}

func roundQ(q results.Quantiles) results.Quantiles {
	r := func(x float64) float64 { return float64(int(x*10+0.5)) / 10 }
	return results.Quantiles{P0: r(q.P0), P50: r(q.P50), P90: r(q.P90), P99: r(q.P99), P100: r(q.P100)}
}

// A sweep on a live Redis: a paused holder outlives a 250 ms lease and
// loses an update without fencing, and holds within a 2 s one, so the
// frontier is 2 s; the page, sweep.json and each run's report are there.
func TestSweepFindsTheFrontier(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	store := t.TempDir()
	inv := lockcheck("sweep", "--out", store, "--seed", "1", "--backends", "redis", "--workload", "unfenced",
		"--nemesis", "pause-holder", "--ttl", "250ms,2s", "--pause", "900ms", "--seeds", "1", "--time-limit", "4s")
	assert.Equal(t, exitInvalid, inv.code, "the 250 ms cell is false: stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
	entries, err := os.ReadDir(store)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	dir := filepath.Join(store, entries[0].Name())
	s, err := results.ReadSweep(dir)
	require.NoError(t, err)
	require.Len(t, s.Cells, 2)
	short, long := s.Cells[0], s.Cells[1]
	assert.Equal(t, results.OutcomeUnsafe, short.Outcome, short.Excludes)
	assert.Positive(t, short.FailedChecks["resource"], "the paused holder's late write overwrote a newer value")
	require.NotNil(t, short.RecoveryP50Ms, "a next grant after each pause")
	assert.Less(t, *short.RecoveryP50Ms, 900.0, "the next client is granted the lock while the holder is still paused")
	assert.Equal(t, results.OutcomeSafe, long.Outcome, long.Excludes)
	assert.Equal(t, 1, long.WithinLease, "its pauses were delivered within the lease")
	require.Len(t, s.Frontier, 1)
	assert.Equal(t, "2s", s.Frontier[0].At)
	for _, r := range s.Runs {
		assert.FileExists(t, filepath.Join(dir, r.Dir, results.ReportFile))
	}
	assert.FileExists(t, filepath.Join(dir, results.SweepReport))
	assert.FileExists(t, filepath.Join(dir, results.JUnitFile))
	assert.Regexp(t, `(?m)^frontier redis/correct unfenced pause-holder .*: TTL 2s: every seed held`, inv.stdout)
}

// A lock client program says whether it hands out fences only in its
// init_ok, once a run has started it: a fenced cell of one is fenced by
// the resource unless --fence-source says otherwise.
func TestSweepFencesAProgramByTheResource(t *testing.T) {
	client := "/usr/bin/python3 " + filepath.Join("..", "..", "examples", "clients", "redis-py", "watchdog.py")
	runs, _, err := planSweep(t, "--client", client, "--topology", "redis", "--workload", "fenced", "--seeds", "1")
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, workloads.FenceFromResource, runs[0].cfg.Run.FenceSource)
	assert.Contains(t, runs[0].cfg.Run.CommandLine, "--fence-source")
	runs, _, err = planSweep(t, "--client", client, "--topology", "redis", "--workload", "fenced", "--seeds", "1", "--fence-source", "lock")
	require.NoError(t, err)
	assert.Equal(t, workloads.FenceFromLock, runs[0].cfg.Run.FenceSource, "as asked")
}
