package cli

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/nemesis"
	"github.com/lockcheck/lockcheck/results"
	"github.com/lockcheck/lockcheck/workloads"
)

// sweepAxes are the flags of run that a sweep takes as lists: one cell per
// combination of their values.
var sweepAxes = []string{"ttl", "pause", "think", nemesis.ParamSkew}

type sweepFlags struct {
	compareFlags
	ttls, pauses, thinks, skews []string
	seeds                       int
	// runs are the grid's runs as PreRunE planned them, this shard's.
	runs []sweepRun
	grid int
}

// sweepRun is one planned run: a cell of the grid at one seed.
type sweepRun struct {
	results.SweepRun
	cfg harness.Config
}

// point is one combination of the sweep's axes.
type point struct {
	ttl             time.Duration
	pause, think    string
	skew            string
	pauses, thinkDs workloads.Distribution
}

func newSweepCmd() *cobra.Command {
	cmd, _ := sweepCommand()
	return cmd
}

// sweepCommand is the sweep command and the flags it parses into.
func sweepCommand() (*cobra.Command, *sweepFlags) {
	f := &sweepFlags{}
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Run a grid of TTLs, pauses, work times and skews per backend and find the safety frontier",
		Long: `sweep runs the cells of a grid over run settings: every backend (--backends,
or --client programs) × workload × fault set × --ttl × --pause × --think ×
--skew, each given as a comma-separated list, each cell --seeds times (seed
S, S+1, ... for every cell, so that cells differ in their settings only).
It writes <out>/<timestamp>-sweep/ holding sweep.html (a heatmap per
backend, workload and faults, coloured by the share of seeds that were
false, each cell linking to its runs' reports; the frontier; a decision
table in the articles' terms), sweep.json and junit.xml, and a run
directory per run. The pages are rewritten after every run, so an
interrupted sweep keeps the runs it did.

Each cell measures: the share of its seeds that were false and which checks
failed; double-ownership windows per minute and the longest; stale writes
refused (what fencing saved); the time from each fault's start to the next
grant (the availability cost of a holder paused or killed past its lease,
a failover, a restart); acquire p50 and p99; grants per second.

The frontier is, per backend, workload and faults, the smallest TTL from
which on every seed held (and, with several pauses, the largest pause), with
what that many seeds exclude: 0 of n false excludes a failure rate above
1-0.05^(1/n) at 95 % confidence (26 % for n = 10). A cell with a run that
gave no verdict is unknown: neither safe nor unsafe. A pause-holder run
whose pause was delivered in full but within the lease (its fault's moment,
a lease running out under it, never came) is unknown by its own verdict;
the sweep counts it as held and says so.

--pause and --think take distributions as well as durations: a range
(100ms-900ms), or @FILE, a file of measured durations in ms, one per line
(a GC log's pauses), from which each fault or critical section draws; the
page shows the quantiles drawn from.

It shards like compare: --shard I/N --seed S runs every N-th run of the
grid; lockcheck merge puts the shards back together (docs/nightly.md).

Exit codes: 0 every cell held, 1 some cell was false, 2 some cell is
unknown, could not run, or the sweep was interrupted.`,
		Example: `  lockcheck sweep --backends redis --workload unfenced,fenced --nemesis pause-holder --ttl 250ms,500ms,1s,2s --pause 900ms --seeds 3 --time-limit 10s
  lockcheck sweep --backends redis --workload unfenced --nemesis none --ttl 250ms,500ms,1s,2s --think 400ms-1200ms --seeds 3 --time-limit 10s
  lockcheck sweep --client '/usr/bin/python3 examples/clients/redis-py/watchdog.py' --topology redis --workload unfenced --ttl 250ms,1s --pause @gc-pauses.txt
  lockcheck sweep --backends redis,etcd --ttl 1s,2s,5s --seeds 10 --seed 7 --shard 2/4`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) (err error) {
			f.runs, f.grid, err = f.plan(cmd)
			return err
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return runSweep(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.backends, "backends", "", "backends to sweep, comma-separated, each NAME or NAME/VARIANT (empty: "+catalog.DefaultBackend+", or with --client the client programs alone)")
	fl.StringVar(&f.workloads, "workload", "unfenced,fenced", "workloads, comma-separated: unfenced, fenced")
	fl.StringVar(&f.nemesis, "nemesis", "pause-holder", "fault sets, comma-separated (none for no fault); join faults that run together with +; "+signatureWord+" is each backend's own")
	f.addClientFlags(fl, "sweep", "grid")
	fl.StringVar(&f.shard, "shard", "", "run only shard I of N of the grid's runs (I/N): the runs whose place in the grid, counted from 0, leaves I-1 divided by N; needs --seed")
	fl.StringSliceVar(&f.ttls, "ttl", []string{"500ms"}, "lease lengths to try, comma-separated")
	fl.StringSliceVar(&f.pauses, "pause", nil, "pause lengths to try, comma-separated, each a duration, a range (100ms-900ms) or @FILE of measured pauses in ms, one per line, from which each fault draws (empty: twice the lease the backend grants)")
	fl.StringSliceVar(&f.thinks, "think", []string{"20ms"}, "work times inside the lock to try, comma-separated, each a duration, a range (400ms-1200ms) or @FILE of measured work times in ms, one per line, from which each critical section draws")
	fl.StringSliceVar(&f.skews, nemesis.ParamSkew, nil, "clock skews to try with clock faults, comma-separated (empty: --skew's default, "+nemesis.DefaultSkew.String()+")")
	fl.IntVar(&f.seeds, "seeds", 3, "runs per cell, seeds S, S+1, ...")
	// Every other flag of run, but the axes, which the sweep takes as lists.
	runSet := pflag.NewFlagSet("run", pflag.ContinueOnError)
	addRunFlags(runSet, &f.run, 10*time.Second)
	runSet.VisitAll(func(fl2 *pflag.Flag) {
		if !slices.Contains(sweepAxes, fl2.Name) {
			fl.AddFlag(fl2)
		}
	})
	// run's flags read "changed" from the command's own flags.
	f.run.changed = fl.Changed
	fl.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "workloads" {
			name = "workload" // compare's spelling
		}
		return pflag.NormalizedName(name)
	})
	return cmd, f
}

// points reads the axes into every combination of their values, in the
// grid's order: TTL, then pause, then think, then skew.
func (f *sweepFlags) points() ([]point, error) {
	var ttls []time.Duration
	for _, s := range f.ttls {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d < time.Millisecond {
			return nil, fmt.Errorf("--ttl %q: want durations of at least 1ms, comma-separated, such as 250ms,500ms,1s", s)
		}
		if d > f.run.limit {
			return nil, fmt.Errorf("--ttl %s: longer than --time-limit %s: a run shorter than one lease cannot see a lease run out, so it would test nothing", d, f.run.limit)
		}
		ttls = append(ttls, d)
	}
	pauses := []string{""}
	if len(f.pauses) > 0 {
		pauses = f.pauses
	}
	pauseDs := make([]workloads.Distribution, len(pauses))
	for i, p := range pauses {
		if p == "" {
			continue
		}
		d, err := parsePause(p)
		if err != nil {
			return nil, fmt.Errorf("--pause: %w", err)
		}
		if d.Max < minPause {
			return nil, fmt.Errorf("--pause %q: must be at least %s", p, minPause)
		}
		pauseDs[i] = d
	}
	thinks := make([]workloads.Distribution, len(f.thinks))
	for i, t := range f.thinks {
		d, err := workloads.ParseDistribution(t)
		if err != nil {
			return nil, fmt.Errorf("--think: %w", err)
		}
		thinks[i] = d
	}
	skews := []string{""}
	if len(f.skews) > 0 {
		skews = nil
		for _, s := range f.skews {
			if _, err := time.ParseDuration(strings.TrimSpace(s)); err != nil {
				return nil, fmt.Errorf("--skew %q: want durations, comma-separated, such as 2s,-20s", s)
			}
			skews = append(skews, strings.TrimSpace(s))
		}
	}
	if len(ttls) == 0 || len(thinks) == 0 {
		return nil, fmt.Errorf("--ttl and --think need at least one value each")
	}
	var out []point
	for _, ttl := range ttls {
		for pi, p := range pauses {
			for ti, t := range f.thinks {
				for _, sk := range skews {
					out = append(out, point{ttl: ttl, pause: p, pauses: pauseDs[pi], think: t, thinkDs: thinks[ti], skew: sk})
				}
			}
		}
	}
	return out, nil
}

// plan lays out every run of the grid, in its order (point, backend, fault
// set, workload, seed), and keeps this shard's.
func (f *sweepFlags) plan(cmd *cobra.Command) ([]sweepRun, int, error) {
	if f.seeds < 1 {
		return nil, 0, fmt.Errorf("--seeds %d: want at least 1 run per cell", f.seeds)
	}
	if strings.TrimSpace(f.backends) == "" && len(f.clients) == 0 {
		f.backends = catalog.DefaultBackend
	}
	targets, err := f.targets()
	if err != nil {
		return nil, 0, err
	}
	workloadNames, err := parseWorkloads(f.workloads)
	if err != nil {
		return nil, 0, fmt.Errorf("--workload: %w", err)
	}
	sets, err := faultSets(f.nemesis)
	if err != nil {
		return nil, 0, err
	}
	points, err := f.points()
	if err != nil {
		return nil, 0, err
	}
	sh, err := f.seedAndShard()
	if err != nil {
		return nil, 0, err
	}
	var runs []sweepRun
	for _, p := range points {
		for k := range f.seeds {
			rf := sweepRunFlags(f.run, p, f.run.seed+int64(k))
			cells, err := planCells(cmd, rf, targets, workloadNames, sets, func(rf runFlags, faults []string) []string {
				return sweepCellCommandLine(cmd, rf, p, faults)
			})
			if err != nil {
				return nil, 0, err
			}
			for _, c := range cells {
				runs = append(runs, sweepRunOf(c, p, rf.seed))
			}
		}
	}
	// Seeds innermost: the runs of a cell come together.
	ordered := make([]sweepRun, 0, len(runs))
	perPoint := len(runs) / max(1, len(points))
	perSeed := perPoint / f.seeds
	for pi := range points {
		for c := range perSeed {
			for k := range f.seeds {
				ordered = append(ordered, runs[pi*perPoint+k*perSeed+c])
			}
		}
	}
	for i := range ordered {
		ordered[i].At = i
	}
	return shareOf(sh, ordered), len(ordered), nil
}

// sweepRunFlags maps one point of the grid and a seed onto run's flags:
// the one place a sweep cell becomes what compare builds a run from.
func sweepRunFlags(base runFlags, p point, seed int64) runFlags {
	rf := base
	rf.ttl, rf.think, rf.seed = p.ttl, p.think, seed
	rf.pause, rf.pauses = 0, workloads.Distribution{}
	if p.pause != "" {
		if p.pauses.Fixed() {
			rf.pause = p.pauses.Min
		} else {
			rf.pauses = p.pauses
		}
	}
	if p.skew != "" {
		rf.apply = append(append([]func(*harness.Config) error{}, base.apply...), func(cfg *harness.Config) error {
			cfg.Run.Params[nemesis.ParamSkew] = p.skew
			return nil
		})
	}
	return rf
}

// sweepRunOf is a planned cell at a point of the grid and a seed.
func sweepRunOf(c cell, p point, seed int64) sweepRun {
	r := sweepRun{SweepRun: results.SweepRun{Cell: c.Cell, Seed: seed}, cfg: c.cfg}
	s := &r.Settings
	s.TTL, s.TTLms, s.LeaseMs = p.ttl.String(), p.ttl.Milliseconds(), c.cfg.Lease.Milliseconds()
	s.Think, s.ThinkQuantiles = p.think, results.DistributionQuantiles(p.thinkDs.Quantile)
	if len(c.Nemesis) > 0 {
		s.Pause = p.pause
		pauses := p.pauses
		if p.pause == "" {
			s.Pause = "twice the lease"
			pauses = workloads.Distribution{Min: c.cfg.Pause, Max: c.cfg.Pause}
		}
		s.PauseQuantiles = results.DistributionQuantiles(pauses.Quantile)
		s.Skew = p.skew
	}
	return r
}

// sweepCellCommandLine is the lockcheck run command line that repeats one
// run of the grid: its backend, workload, faults and settings, and every
// other flag the user gave sweep.
func sweepCellCommandLine(cmd *cobra.Command, rf runFlags, p point, faults []string) []string {
	lead := []string{"lockcheck", "run", "--backend", rf.backend, "--variant", rf.variant, "--workload", rf.workload,
		"--nemesis", orNone(faults), "--time-limit", rf.limit.String(), "--ttl", p.ttl.String(), "--think", p.think}
	if p.pause != "" {
		lead = append(lead, "--pause", p.pause)
	}
	if p.skew != "" {
		lead = append(lead, "--skew="+p.skew)
	}
	if !cmd.Flags().Changed("fence-source") && rf.fenceSource != cmd.Flags().Lookup("fence-source").DefValue {
		lead = append(lead, "--fence-source", rf.fenceSource) // chosen for the cell (planCells)
	}
	skip := append([]string{"backends", "workload", "nemesis", "time-limit", "out", "shard", "seeds"}, sweepAxes...)
	return commandLine(cmd, lead, rf.seed, skip...)
}

func runSweep(cmd *cobra.Command, f *sweepFlags) error {
	dir, err := results.NewSweepDir(f.run.out, time.Now())
	if err != nil {
		return err
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	fmt.Fprintf(stdout, "lockcheck sweep: %d runs of a grid of %d, %d seeds per cell from %d, %s each, into %s\n",
		len(f.runs), f.grid, f.seeds, f.run.seed, f.run.limit, dir)
	s := &results.Sweep{
		Started: time.Now().UTC().Format(time.RFC3339), CommandLine: reproduce(cmd, f.run.seed),
		TimeLimitMs: f.run.limit.Milliseconds(), Seed: f.run.seed, Seeds: f.seeds, Grid: f.grid,
	}
	for _, r := range f.runs {
		s.Runs = append(s.Runs, r.SweepRun)
	}
	if err := results.WriteSweep(dir, s); err != nil {
		return err
	}
	m := matrix{what: "sweep", write: func() error { return results.WriteSweep(dir, s) }}
	for i := range s.Runs {
		r := &s.Runs[i]
		m.cells = append(m.cells, &r.Cell)
		m.cfgs = append(m.cfgs, f.runs[i].cfg)
		m.names = append(m.names, fmt.Sprintf("%s seed %d", r.CellKey(), r.Seed))
	}
	m.ran = func(i int) {
		r := &s.Runs[i]
		if r.Status != results.CellRan {
			return
		}
		res, err := results.ReadResults(filepath.Join(dir, r.Dir))
		if err == nil {
			r.Measures, err = results.Measure(filepath.Join(dir, r.Dir), res)
		}
		if err != nil {
			r.Why = "its measures could not be read: " + err.Error()
		}
	}
	interrupted, err := m.run(dir, checker.Options{LinearizabilityTimeout: f.run.linTimeout}, stdout, stderr)
	if err != nil {
		return err
	}
	s.Interrupted = interrupted
	s.Finished = time.Now().UTC().Format(time.RFC3339)
	if err := results.WriteSweep(dir, s); err != nil {
		return err
	}
	for _, fr := range s.Frontier {
		fmt.Fprintf(stdout, "frontier %s/%s %s %s (%s): %s\n", fr.Backend, fr.Variant, fr.Workload, results.FaultsName(fr.Nemesis), fr.Fixed, fr.Statement)
	}
	fmt.Fprintf(stdout, "sweep: %s\n", filepath.Join(dir, results.SweepReport))
	return sweepExit(s)
}

// sweepExit: 2 when a cell is unknown or the sweep was interrupted, else 1
// when some cell was false, else 0.
func sweepExit(s *results.Sweep) error {
	code := exitValid
	for _, c := range s.Cells {
		switch c.Outcome {
		case results.OutcomeUnknown:
			code = exitUnknown
		case results.OutcomeUnsafe:
			code = max(code, exitInvalid)
		}
	}
	if s.Interrupted {
		code = exitUnknown
	}
	if code == exitValid {
		return nil
	}
	return exitError{code}
}
