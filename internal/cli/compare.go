package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/program"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/nemesis"
	"github.com/lockcheck/lockcheck/results"
	"github.com/lockcheck/lockcheck/workloads"
)

// fallbackFaults stand for the signature faults of a backend that declares
// none (catalog.Backend.Signature): every backend can take them.
var fallbackFaults = []string{"pause-holder"}

// signatureWord in --nemesis stands for each backend's signature faults.
const signatureWord = "signature"

// defaultCellLimit keeps the default matrix (every backend, fenced and
// unfenced, without faults and with its signature faults: 20 cells with five
// backends) under 15 minutes on two cores, with each cell's start, stop and
// check on top of its time limit.
const defaultCellLimit = 15 * time.Second

type compareFlags struct {
	run                          runFlags
	backends, workloads, nemesis string
	shard                        string
	// clients are lock client programs (--client, repeated), each a
	// backend of the matrix named after it, on topology.
	clients           []string
	topology          string
	clientInitTimeout time.Duration
	// cells are the matrix as PreRunE planned it.
	cells []cell
}

func newCompareCmd() *cobra.Command {
	cmd, _ := compareCommand()
	return cmd
}

// compareCommand is the compare command and the flags it parses into.
func compareCommand() (*cobra.Command, *compareFlags) {
	f := &compareFlags{}
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Run a matrix of backends, workloads and faults and compare the verdicts",
		Long: `compare runs one test per cell of backend × workload × faults, one after the
other, then writes <out>/<timestamp>-compare/ holding compare.html (the matrix
of verdicts, each linking to its run's report), compare.json and junit.xml
(one test suite per cell, one test case per check), and a run directory per
cell. The pages are rewritten after every cell, so an interrupted comparison
keeps what it ran.

By default every registered backend (` + strings.Join(catalog.Names(), ", ") + `) runs its
correct variant, fenced and unfenced, without faults and under its signature
faults:
` + signatureHelp() + `
Combinations that make no sense (a fault that needs what the backend does
not offer: pause-nodes on a single node, clock-skew without faked clocks, a
failover or leader fault where the service has none) are skipped, and the
page says why.

Exit codes: 0 every cell's verdict is true, 1 some verdict is false, 2 some
cell is unknown, could not run, or the comparison was interrupted.`,
		Example: `  lockcheck compare
  lockcheck compare --backends redis,redis/setnx-expire --nemesis none,pause-holder,kill-client
  lockcheck compare --backends redlock,redsync --nemesis signature,kill-restart --time-limit 30s
  lockcheck compare --client 'python3 plain.py' --client 'python3 watchdog.py' --topology redis --nemesis none,pause-holder`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) (err error) {
			f.cells, err = f.plan(cmd)
			return err
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return runCompare(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.backends, "backends", "", "backends to compare, comma-separated, each NAME or NAME/VARIANT (empty: every registered backend, its correct variant)")
	fl.StringVar(&f.workloads, "workloads", "fenced,unfenced", "workloads, comma-separated: fenced, unfenced")
	fl.StringVar(&f.nemesis, "nemesis", "none,"+signatureWord, "fault sets, comma-separated; join faults that run together with +, such as clock-skew+pause-nodes; "+signatureWord+" is each backend's own")
	f.addClientFlags(fl, "compare", "matrix")
	fl.StringVar(&f.shard, "shard", "", "run only shard I of N of the matrix (I/N, such as 2/3): the cells whose place in the matrix, counted from 0, leaves I-1 divided by N; needs --seed so that every shard plans the same matrix")
	addRunFlags(fl, &f.run, defaultCellLimit)
	return cmd, f
}

// addClientFlags declares --client, --topology and --client-init-timeout
// of a command (compare, sweep) whose matrix (grid) they add to.
func (f *compareFlags) addClientFlags(fl *pflag.FlagSet, verb, matrix string) {
	fl.StringArrayVar(&f.clients, "client", nil, "a lock client program to "+verb+", as run's --client (repeat for several): each is a backend of the "+matrix+" named after its script or program; with no --backends, the "+matrix+" is the client programs alone")
	fl.StringVar(&f.topology, "topology", "", "with --client: the built-in backend whose servers the client programs talk to (default redis)")
	fl.DurationVar(&f.clientInitTimeout, "client-init-timeout", program.DefaultInitTimeout, "with --client: how long a program may take to answer init")
}

func signatureHelp() string {
	var b strings.Builder
	for _, n := range catalog.Names() {
		b2, _, _ := catalog.Lookup(n, "")
		fmt.Fprintf(&b, "  %-9s %s\n", n, results.FaultsName(backendFaults(b2)))
	}
	fmt.Fprintf(&b, "  %-9s %s\n", "others", results.FaultsName(fallbackFaults))
	return b.String()
}

// backendFaults are the signature faults of backend b.
func backendFaults(b catalog.Backend) []string {
	if len(b.Signature) > 0 {
		return b.Signature
	}
	return fallbackFaults
}

// target is a backend and variant to compare; program, if set, is the
// lock client program the backend is (not a backend of the catalog).
type target struct {
	backend, variant string
	program          *catalog.Backend
}

// parseTargets reads --backends: NAME or NAME/VARIANT, comma-separated.
func parseTargets(s string) ([]target, error) {
	if strings.TrimSpace(s) == "" {
		var all []target
		for _, name := range catalog.Names() {
			_, v, err := catalog.Lookup(name, "")
			if err != nil {
				return nil, err
			}
			all = append(all, target{backend: name, variant: v})
		}
		return all, nil
	}
	var out []target
	for _, item := range strings.Split(s, ",") {
		name, variant, _ := strings.Cut(strings.TrimSpace(item), "/")
		_, v, err := catalog.Lookup(name, variant)
		if err != nil {
			return nil, fmt.Errorf("--backends: %w", err)
		}
		out = append(out, target{backend: name, variant: v})
	}
	return out, nil
}

func parseWorkloads(s string) ([]string, error) {
	var out []string
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		if w != "fenced" && w != "unfenced" {
			return nil, fmt.Errorf("--workloads: unknown workload %q (choose fenced, unfenced or both, comma-separated)", w)
		}
		out = append(out, w)
	}
	return out, nil
}

// faultSets reads --nemesis: fault sets separated by commas, the faults of a
// set joined by +. The signature word is resolved per backend later, so it
// stays a set of its own here.
func faultSets(s string) ([][]string, error) {
	var sets [][]string
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == signatureWord {
			sets = append(sets, []string{signatureWord})
			continue
		}
		faults, err := nemesis.Parse(strings.ReplaceAll(item, "+", ","))
		if err != nil {
			return nil, fmt.Errorf("--nemesis: %w", err)
		}
		sets = append(sets, faults)
	}
	return sets, nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// cell is one planned run of the matrix.
type cell struct {
	results.Cell
	cfg harness.Config
}

// plan reads the matrix from the flags and lays out its cells, picking a
// seed when none was given.
func (f *compareFlags) plan(cmd *cobra.Command) ([]cell, error) {
	targets, err := f.targets()
	if err != nil {
		return nil, err
	}
	workloads, err := parseWorkloads(f.workloads)
	if err != nil {
		return nil, err
	}
	sets, err := faultSets(f.nemesis)
	if err != nil {
		return nil, err
	}
	sh, err := f.seedAndShard()
	if err != nil {
		return nil, err
	}
	cells, err := planCells(cmd, f.run, targets, workloads, sets, func(rf runFlags, faults []string) []string {
		return cellCommandLine(cmd, rf, faults)
	})
	if err != nil {
		return nil, err
	}
	return shareOf(sh, cells), nil
}

// targets are the backends of the matrix: --backends, then each --client
// program registered as a backend of its own (alone when --backends is
// not given).
func (f *compareFlags) targets() ([]target, error) {
	var clients []target
	for i, c := range f.clients {
		argv, err := program.SplitCommand(c)
		if err != nil {
			return nil, fmt.Errorf("--client %q: %w", c, err)
		}
		// Two programs of one name (a script with two flag sets) are
		// told apart by their place on the command line.
		name := catalog.ClientName(argv)
		for _, t := range clients {
			if t.backend == name {
				name += "-" + strconv.Itoa(i+1)
			}
		}
		b, err := catalog.ClientTarget(name, catalog.ClientProgram{Command: argv, Topology: f.topology, InitTimeout: f.clientInitTimeout})
		if err != nil {
			return nil, err
		}
		clients = append(clients, target{backend: name, variant: catalog.ClientVariant, program: &b})
	}
	targets, err := parseTargets(f.backends)
	if err != nil {
		return nil, err
	}
	if len(clients) > 0 && strings.TrimSpace(f.backends) == "" {
		targets = nil
	}
	return append(targets, clients...), nil
}

// seedAndShard reads --shard and picks a seed when none was given.
func (f *compareFlags) seedAndShard() (shard, error) {
	sh, err := parseShard(f.shard)
	if err != nil {
		return sh, err
	}
	if sh.Of > 1 && f.run.seed == 0 {
		return sh, fmt.Errorf("--shard %s needs --seed: every shard must run the matrix with the same seed", f.shard)
	}
	if f.run.seed == 0 {
		f.run.seed = harness.PickSeed()
	}
	return sh, nil
}

func runCompare(cmd *cobra.Command, f *compareFlags) error {
	cells := f.cells
	dir, err := results.NewCompareDir(f.run.out, time.Now())
	if err != nil {
		return err
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	toRun := 0
	for _, c := range cells {
		if c.Status != results.CellSkipped {
			toRun++
		}
	}
	fmt.Fprintf(stdout, "lockcheck compare: %d cells (%d to run, %d skipped), %s each, seed %d, into %s\n",
		len(cells), toRun, len(cells)-toRun, f.run.limit, f.run.seed, dir)

	cmp := &results.Comparison{
		Started: time.Now().UTC().Format(time.RFC3339), CommandLine: reproduce(cmd, f.run.seed),
		TimeLimitMs: f.run.limit.Milliseconds(), Seed: f.run.seed,
	}
	for _, c := range cells {
		cmp.Cells = append(cmp.Cells, c.Cell)
	}
	if err := results.WriteComparison(dir, cmp); err != nil {
		return err
	}
	m := matrix{what: "comparison", write: func() error { return results.WriteComparison(dir, cmp) }}
	for i := range cmp.Cells {
		m.cells = append(m.cells, &cmp.Cells[i])
		m.cfgs = append(m.cfgs, cells[i].cfg)
		m.names = append(m.names, cellName(&cmp.Cells[i]))
	}
	interrupted, err := m.run(dir, checker.Options{LinearizabilityTimeout: f.run.linTimeout}, stdout, stderr)
	if err != nil {
		return err
	}
	cmp.Interrupted = interrupted
	cmp.Finished = time.Now().UTC().Format(time.RFC3339)
	if err := results.WriteComparison(dir, cmp); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "comparison: %s\n", filepath.Join(dir, results.CompareReport))
	return compareExit(cmp)
}

// planCells lays out the matrix in the order it runs: backend, then fault
// set, then workload, with a configuration for each cell that makes sense,
// every other setting from run, each cell's command line from lineOf.
func planCells(cmd *cobra.Command, run runFlags, targets []target, workloadNames []string, sets [][]string, lineOf func(runFlags, []string) []string) ([]cell, error) {
	var cells []cell
	seen := map[string]bool{}
	for _, t := range targets {
		rt := run
		rt.backend, rt.variant, rt.target = t.backend, t.variant, t.program
		b, _, err := rt.resolve()
		if err != nil {
			return nil, err
		}
		for _, set := range sets {
			faults := set
			if len(set) == 1 && set[0] == signatureWord {
				faults = backendFaults(b)
			}
			for _, w := range workloadNames {
				key := t.backend + "/" + t.variant + " " + w + " " + results.FaultsName(faults)
				if seen[key] {
					continue // none and signature can name the same set
				}
				seen[key] = true
				c := cell{Cell: results.Cell{Backend: t.backend, Variant: t.variant, Workload: w, Nemesis: faults}}
				if c.Nemesis == nil {
					c.Nemesis = []string{}
				}
				rf := rt
				rf.workload = w
				if w == workloads.Fenced && rf.fenceSource == workloads.FenceFromLock && (t.program != nil || !b.HandsOutFences(t.variant)) && !cmd.Flags().Changed("fence-source") {
					// A lock that hands out no fence of its own is fenced by
					// the resource's sequence, which works with every lock:
					// with the lock's fences the cell would be refused. A
					// program says whether it has fences only in its
					// init_ok, once the run has started it, so it is fenced
					// by the resource too unless --fence-source says
					// otherwise.
					rf.fenceSource = workloads.FenceFromResource
				}
				req, err := rf.request(faults, lineOf(rf, faults))
				if err != nil {
					return nil, fmt.Errorf("%s: %w", key, err)
				}
				c.cfg = req
				var unavailable *nemesis.UnavailableError
				if err := harness.CheckFaults(req, b); errors.As(err, &unavailable) {
					// A fault this backend cannot take is a cell to skip,
					// not a mistake of the user's.
					c.Status, c.Why = results.CellSkipped, unavailable.Error()
				} else if c.cfg, err = harness.NewPlan(req); err != nil {
					// A missing server program is the user's to fix before
					// anything starts, like run's.
					return nil, fmt.Errorf("%s: %w", key, err)
				}
				cells = append(cells, c)
			}
		}
	}
	return cells, nil
}

// matrix is the cells of a comparison or a sweep, to run one after the
// other into one folder.
type matrix struct {
	cells []*results.Cell
	cfgs  []harness.Config
	names []string
	what  string // "comparison", "sweep": what an interrupt stopped
	// ran, if set, is called after cell i ran, before its line is printed.
	ran func(i int)
	// write rewrites the folder's pages, after every cell.
	write func() error
}

// run runs every cell that is not skipped, printing a line for each, until
// Ctrl-C (the cells left are not run); it reports whether it was
// interrupted.
func (m matrix) run(dir string, opts checker.Options, stdout, stderr io.Writer) (bool, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	toRun := 0
	for _, c := range m.cells {
		if c.Status != results.CellSkipped {
			toRun++
		}
	}
	interrupted, n := false, 0
	for i, c := range m.cells {
		if c.Status == results.CellSkipped {
			fmt.Fprintf(stdout, "  %-44s skipped: %s\n", m.names[i], c.Why)
			continue
		}
		n++
		if ctx.Err() != nil {
			c.Status, c.Why = results.CellNotRun, "the "+m.what+" was interrupted first"
			continue
		}
		out, v := runMatrixCell(ctx, c, m.cfgs[i], dir, fmt.Sprintf("[%d/%d %s]", n, toRun, m.names[i]), opts, stderr)
		interrupted = interrupted || out.Interrupted
		if m.ran != nil {
			m.ran(i)
		}
		line := fmt.Sprintf("  %-44s %s", m.names[i], c.Status)
		if c.Status == results.CellRan {
			line = fmt.Sprintf("  %-44s %-7s %s (%.0f s)", m.names[i], v, c.Reason, c.Seconds)
		} else if c.Why != "" {
			line += ": " + c.Why
		}
		fmt.Fprintln(stdout, line)
		if err := m.write(); err != nil {
			return interrupted, err
		}
	}
	return interrupted || ctx.Err() != nil, nil
}

// runMatrixCell runs one cell of a comparison or a sweep into the folder
// dir and checks it, with progress on stderr labelled label, and records
// in c how it went.
func runMatrixCell(ctx context.Context, c *results.Cell, cfg harness.Config, dir, label string, opts checker.Options, stderr io.Writer) (harness.Outcome, checker.Validity) {
	cfg.Out = dir
	cfg.OnProgress = progressReporter(stderr, label)
	started := time.Now()
	out, v, err := runAndCheck(ctx, cfg, results.CheckDir, opts, io.Discard, stderr)
	c.Seconds = time.Since(started).Round(100 * time.Millisecond).Seconds()
	runCell(c, dir, out, err)
	return out, v
}

// runCell records how a cell's run went.
func runCell(c *results.Cell, dir string, out harness.Outcome, err error) {
	if out.Dir != "" {
		if rel, relErr := filepath.Rel(dir, out.Dir); relErr == nil {
			c.Dir = filepath.ToSlash(rel)
		}
	}
	if r, readErr := readCellResults(out.Dir); readErr == nil {
		c.Ran(r)
		if err != nil {
			c.Why = err.Error()
		}
		return
	}
	c.Status = results.CellError
	if err != nil {
		c.Why = err.Error()
	} else {
		c.Why = "the run left no results"
	}
}

func readCellResults(dir string) (*results.Results, error) {
	if dir == "" {
		return nil, os.ErrNotExist
	}
	return results.ReadResults(dir)
}

func cellName(c *results.Cell) string {
	return fmt.Sprintf("%s/%s %s %s", c.Backend, c.Variant, c.Workload, results.FaultsName(c.Nemesis))
}

// compareExit: 2 when a cell is unknown or could not run or the comparison
// was interrupted, else 1 when some verdict is false, else 0.
func compareExit(c *results.Comparison) error {
	code := exitValid
	for _, cell := range c.Cells {
		switch {
		case cell.Status == results.CellError, cell.Status == results.CellNotRun:
			code = exitUnknown
		case cell.Status == results.CellRan && *cell.Valid == checker.Unknown:
			code = exitUnknown
		case cell.Status == results.CellRan && *cell.Valid == checker.Invalid:
			code = max(code, exitInvalid)
		}
	}
	if c.Interrupted {
		code = exitUnknown
	}
	if code == exitValid {
		return nil
	}
	return exitError{code}
}

// cellCommandLine is the lockcheck run command line that repeats one cell:
// its backend, workload and faults, the time limit, the seed, and every
// other flag the user gave compare.
func cellCommandLine(cmd *cobra.Command, f runFlags, faults []string) []string {
	lead := []string{"lockcheck", "run", "--backend", f.backend, "--variant", f.variant, "--workload", f.workload,
		"--nemesis", orNone(faults), "--time-limit", f.limit.String()}
	if !cmd.Flags().Changed("fence-source") && f.fenceSource != cmd.Flags().Lookup("fence-source").DefValue {
		lead = append(lead, "--fence-source", f.fenceSource) // chosen for the cell (planCells)
	}
	return commandLine(cmd, lead, f.seed, "backends", "workloads", "nemesis", "time-limit", "out", "shard")
}
