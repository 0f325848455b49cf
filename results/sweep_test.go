package results

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

func TestExcludes(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		falseRuns, held, unkn int
		want                  string
	}{
		{"0 of 10", 0, 10, 0, "0 of 10 false: a failure rate above 26 % is excluded at 95 % confidence"},
		{"0 of 3", 0, 3, 0, "0 of 3 false: a failure rate above 63 % is excluded at 95 % confidence"},
		{"0 of 30", 0, 30, 0, "0 of 30 false: a failure rate above 9.5 % is excluded at 95 % confidence"},
		{"3 of 3", 3, 0, 0, "3 of 3 false: unsafe; a failure rate below 37 % is excluded at 95 % confidence"},
		{"1 of 10", 1, 9, 0, "1 of 10 false: unsafe; a failure rate below 0.5 % is excluded at 95 % confidence"},
		{"unknown among held", 0, 2, 1, "0 of 2 false, but 1 without a verdict: neither safe nor unsafe"},
		{"all unknown", 0, 0, 3, "no verdict in 3 seeds: neither safe nor unsafe"},
		{"false among unknown", 1, 1, 1, "1 of 3 false: unsafe; a failure rate below 1.7 % is excluded at 95 % confidence (1 without a verdict counted as not false)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Excludes(tc.falseRuns, tc.held, tc.unkn))
		})
	}
}

// sweepRun is a run of a cell at ttl with verdict v, its measures as given.
func testRun(at int, workload, ttl string, v checker.Validity, m RunMeasures) SweepRun {
	d, _ := time.ParseDuration(ttl)
	valid := v
	if m.Failed == nil {
		m.Failed = []string{}
	}
	return SweepRun{At: at, Seed: int64(1 + at%3),
		Cell:     Cell{Backend: "redis", Variant: "correct", Workload: workload, Nemesis: []string{"pause-holder"}, Status: CellRan, Valid: &valid, Dir: fmt.Sprintf("run-%d", at)},
		Settings: SweepSettings{TTL: ttl, TTLms: d.Milliseconds(), Pause: "900ms", Think: "20ms"},
		Measures: &m}
}

// pauseSweep is the done-when's sweep as its runs could come out: the
// unfenced workload false below the 900 ms pause and held (the pause
// delivered within the lease) above it; the fenced one held everywhere,
// its stale writes refused.
func pauseSweep() []SweepRun {
	var runs []SweepRun
	lost := RunMeasures{Failed: []string{"double_ownership", "resource"}, WindowsPerMinute: 20, LongestWindowMs: 700, RecoveriesMs: []float64{150, 300}}
	within := RunMeasures{WithinLease: true, RecoveriesMs: []float64{900}}
	refused := RunMeasures{WindowsPerMinute: 20, StaleRefused: 3, RecoveriesMs: []float64{150, 300}}
	for _, ttl := range []string{"250ms", "500ms", "1s", "2s"} {
		for range 3 {
			switch ttl {
			case "250ms", "500ms":
				runs = append(runs, testRun(len(runs), "unfenced", ttl, checker.Invalid, lost))
			default:
				runs = append(runs, testRun(len(runs), "unfenced", ttl, checker.Unknown, within))
			}
		}
		for range 3 {
			m := refused
			if ttl == "1s" || ttl == "2s" {
				m = within
			}
			v := checker.Valid
			if m.WithinLease {
				v = checker.Unknown
			}
			runs = append(runs, testRun(len(runs), "fenced", ttl, v, m))
		}
	}
	return runs
}

func TestFrontier(t *testing.T) {
	cells := SweepCells(pauseSweep())
	require.Len(t, cells, 8, "4 TTLs × 2 workloads")
	frontier := Frontiers(cells)
	require.Len(t, frontier, 2, "one TTL frontier per workload")
	byWorkload := map[string]Frontier{}
	for _, f := range frontier {
		byWorkload[f.Workload] = f
	}
	assert.Equal(t, "1s", byWorkload["unfenced"].At, "the first TTL above the pause")
	assert.Contains(t, byWorkload["unfenced"].Statement, "every seed held at 1s and above (0 of 3 false: a failure rate above 63 % is excluded at 95 % confidence")
	assert.Contains(t, byWorkload["unfenced"].Statement, "at 500ms, 3 of 3 false: unsafe")
	assert.Equal(t, "250ms", byWorkload["fenced"].At, "fencing holds at every TTL")

	for _, c := range cells {
		if c.Workload == "unfenced" && c.Settings.TTLms < 1000 {
			assert.Equal(t, OutcomeUnsafe, c.Outcome)
			assert.Equal(t, 1.0, c.ShareFalse)
			assert.Equal(t, map[string]int{"double_ownership": 3, "resource": 3}, c.FailedChecks)
			require.NotNil(t, c.RecoveryP50Ms)
			assert.Equal(t, 150.0, *c.RecoveryP50Ms)
			assert.Equal(t, 300.0, *c.RecoveryMaxMs)
		}
		if c.Settings.TTLms >= 1000 {
			assert.Equal(t, OutcomeSafe, c.Outcome)
			assert.Equal(t, 3, c.WithinLease, "held within the lease, and counted as such")
			assert.Contains(t, c.Excludes, "within the lease")
		}
	}
}

func TestFrontierUnknownAndGaps(t *testing.T) {
	for _, tc := range []struct {
		name     string
		verdicts []checker.Validity // at 250ms, 500ms, 1s, 2s
		at       string
		open     bool
		says     string
	}{
		{"an unknown cell on the safe side leaves it open", []checker.Validity{checker.Invalid, checker.Valid, checker.Valid, checker.Unknown}, "", true, "open: the cell at TTL 2s is unknown"},
		{"a false cell above a held one moves it up", []checker.Validity{checker.Invalid, checker.Valid, checker.Invalid, checker.Valid}, "2s", false, "every seed held at 2s and above"},
		{"nothing held", []checker.Validity{checker.Invalid, checker.Invalid, checker.Invalid, checker.Invalid}, "", false, "none of the TTLs tried held: the safest, 2s, is unsafe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs []SweepRun
			for i, ttl := range []string{"250ms", "500ms", "1s", "2s"} {
				runs = append(runs, testRun(i, "unfenced", ttl, tc.verdicts[i], RunMeasures{}))
			}
			f := Frontiers(SweepCells(runs))
			require.Len(t, f, 1)
			assert.Equal(t, tc.at, f[0].At)
			assert.Equal(t, tc.open, f[0].Open)
			assert.Contains(t, f[0].Statement, tc.says)
		})
	}
}

func TestPauseFrontier(t *testing.T) {
	var runs []SweepRun
	for i, p := range []struct {
		pause string
		ms    float64
		v     checker.Validity
	}{{"100ms", 100, checker.Valid}, {"300ms", 300, checker.Valid}, {"900ms", 900, checker.Invalid}} {
		r := testRun(i, "unfenced", "500ms", p.v, RunMeasures{})
		r.Settings.Pause, r.Settings.PauseQuantiles = p.pause, &Quantiles{P0: p.ms, P50: p.ms, P90: p.ms, P99: p.ms, P100: p.ms}
		runs = append(runs, r)
	}
	var pause []Frontier
	for _, f := range Frontiers(SweepCells(runs)) {
		if f.Axis == "pause" {
			pause = append(pause, f)
		}
	}
	require.Len(t, pause, 1)
	assert.Equal(t, "300ms", pause[0].At, "the largest pause from which down every seed held")
	assert.Contains(t, pause[0].Statement, "every seed held at 300ms and below")
}

// The articles' busy day: work times of 400-1200 ms with no fault; below
// the longest work time a lease runs out under a careful client, which
// skips its write (true, but the work ran twice); from 2 s none.
func TestDecisionsBusyDay(t *testing.T) {
	var runs []SweepRun
	for _, ttl := range []string{"250ms", "500ms", "1s", "2s"} {
		m := RunMeasures{WindowsPerMinute: 12, LongestWindowMs: 800}
		if ttl == "2s" {
			m = RunMeasures{}
		}
		r := testRun(len(runs), "unfenced", ttl, checker.Valid, m)
		r.Nemesis, r.Settings.Pause, r.Settings.Think = []string{}, "", "400ms-1200ms"
		runs = append(runs, r)
	}
	cells := SweepCells(runs)
	d := Decisions(cells)
	require.Len(t, d, 1)
	assert.Equal(t, "2s", d[0].Corrupts.TTL, "when a duplicate corrupts data, only the TTL above the longest work time")
	assert.Equal(t, "250ms", d[0].Wasteful.TTL, "when it is only wasteful, the lock kept its promise at every TTL")
	assert.Contains(t, d[0].Wasteful.Note, "12.0 duplicates/min")
	assert.Equal(t, "think 400ms-1200ms", d[0].Fixed)
}

// writeTestSweep writes a sweep of runs into dir, each run's directory a
// real run of h checked.
func writeTestSweep(t *testing.T, dir string, runs []SweepRun, line []string) *Sweep {
	t.Helper()
	for _, r := range runs {
		writeRun(t, dir, r.Dir, lockCycles(2, 20, 2e9))
	}
	s := &Sweep{Started: "2025-01-02T04:00:00Z", Finished: "2025-01-02T04:10:00Z", CommandLine: line, TimeLimitMs: 10_000, Seed: 1, Seeds: 3, Grid: 24, Runs: runs}
	require.NoError(t, WriteSweep(dir, s))
	return s
}

func TestMergeSweepsIsTheWhole(t *testing.T) {
	all := pauseSweep()
	var one, two []SweepRun
	for _, r := range all {
		if r.At%2 == 0 {
			one = append(one, r)
		} else {
			two = append(two, r)
		}
	}
	root := t.TempDir()
	d1, d2, d3 := filepath.Join(root, "a", "s1"), filepath.Join(root, "b", "s2"), filepath.Join(root, "c", "whole")
	for _, d := range []string{d1, d2, d3} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	writeTestSweep(t, d1, one, []string{"lockcheck", "sweep", "--shard", "1/2", "--seed", "1"})
	writeTestSweep(t, d2, two, []string{"lockcheck", "sweep", "--shard", "2/2", "--seed", "1"})
	whole := writeTestSweep(t, d3, all, []string{"lockcheck", "sweep", "--seed", "1"})

	_, _, sweeps, err := FindMergeable([]string{filepath.Join(root, "b"), filepath.Join(root, "a")})
	require.NoError(t, err)
	require.Len(t, sweeps, 2)
	dir, merged, err := MergeSweeps(filepath.Join(root, "out"), sweeps, []string{"lockcheck", "merge"}, time.Now())
	require.NoError(t, err)
	require.Len(t, merged.Runs, len(all))
	strip := func(cells []SweepCell) []SweepCell {
		out := make([]SweepCell, len(cells))
		for i, c := range cells {
			c.Runs = nil
			out[i] = c
		}
		return out
	}
	assert.Equal(t, strip(whole.Cells), strip(merged.Cells), "the same cells as one run")
	assert.Equal(t, whole.Frontier, merged.Frontier)
	for _, r := range merged.Runs {
		assert.FileExists(t, filepath.Join(dir, r.Dir, ReportFile), "each run's report copied in")
	}
	for _, name := range []string{SweepReport, SweepResults, JUnitFile} {
		assert.FileExists(t, filepath.Join(dir, name))
	}
	var doc junitSuites
	b, err := os.ReadFile(filepath.Join(dir, JUnitFile))
	require.NoError(t, err)
	require.NoError(t, xml.Unmarshal(b, &doc))
	assert.Len(t, doc.Suites, len(all), "a suite per run")

	_, _, err = MergeSweeps(filepath.Join(root, "out"), []string{d1, d3}, nil, time.Now())
	assert.ErrorContains(t, err, "is in both", "a run may not come twice")
}

// Measure reads a run's failed checks and availability cost from its
// directory: sampleHistory's holder is paused at 10 ms, and the next grant
// comes at 520 ms.
func TestMeasure(t *testing.T) {
	dir, _ := writeRun(t, t.TempDir(), "run", sampleHistory(plain, "unfenced"))
	r, err := ReadResults(dir)
	require.NoError(t, err)
	m, err := Measure(dir, r)
	require.NoError(t, err)
	assert.Contains(t, m.Failed, "resource", "the lost update")
	assert.Equal(t, []float64{510}, m.RecoveriesMs, "from the pause to the next grant")
	assert.False(t, m.WithinLease, "the run was false")
	assert.Positive(t, m.WindowsPerMinute)
}

// Only the end of the run ends a pause early: a last pause cut short still
// leaves the run held within the lease; one cut short before another
// began was not delivered.
func TestPausesDelivered(t *testing.T) {
	pauseAt := func(s *runScan, target string, start, asked, held int64) {
		require.NoError(t, s.event(&history.Event{Process: history.Nemesis, Time: start, F: history.NemPause, Value: &history.Value{Target: target, DurationMs: asked}}))
		require.NoError(t, s.event(&history.Event{Process: history.Nemesis, Time: start + held*1e6, F: history.NemResume, Value: &history.Value{Target: target}}))
	}
	var s runScan
	pauseAt(&s, "c1", 1e9, 900, 901)
	pauseAt(&s, "c3", 3e9, 900, 930)
	pauseAt(&s, "c0", 5e9, 900, 450)
	full, cut := s.delivered()
	assert.Equal(t, 2, full)
	assert.Equal(t, 1, cut, "the last pause, cut by the end of the run")

	var early runScan
	pauseAt(&early, "c1", 1e9, 900, 300)
	pauseAt(&early, "c3", 3e9, 900, 900)
	full, cut = early.delivered()
	assert.Equal(t, 1, full)
	assert.Zero(t, cut, "a pause cut short before another began")
}

// The store's index lists a sweep, its cells' outcomes, and its runs
// beneath it.
func TestScanStoreListsSweeps(t *testing.T) {
	store := t.TempDir()
	dir := filepath.Join(store, "20250102-060000"+SweepSuffix)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	runs := pauseSweep()[:6] // the 250ms cells: unfenced false, fenced held
	writeTestSweep(t, dir, runs, []string{"lockcheck", "sweep"})
	entries, err := ScanStore(store)
	require.NoError(t, err)
	require.Len(t, entries, 7, "the sweep and its six runs")
	e := entries[0]
	assert.Equal(t, "sweep", e.Kind)
	assert.Equal(t, "20250102-060000-sweep/sweep.html", e.Href)
	assert.Equal(t, "redis", e.Backend)
	assert.Equal(t, "unfenced, fenced", e.Workload)
	assert.Equal(t, "2 cells, 6 runs of the grid's 24: 1 safe, 1 unsafe.", e.Summary)
	for _, r := range entries[1:] {
		assert.Equal(t, "run", r.Kind)
		assert.Equal(t, e.Path, r.Parent)
	}
}
