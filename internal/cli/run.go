package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
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
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/nemesis"
	"github.com/lockcheck/lockcheck/results"
	"github.com/lockcheck/lockcheck/workloads"
)

type runFlags struct {
	backend, variant, workload, nemesis, fenceSource string
	resource                                         string
	ttl, limit, pause, interval, retry, opTimeout    time.Duration
	linTimeout                                       time.Duration
	// pauses, when not fixed, is the distribution each fault draws its
	// pause from (--pause 100ms-900ms or @FILE); pause is then 0.
	pauses        workloads.Distribution
	think, out    string
	clients, keys int
	seed          int64
	// stopOnAnomaly ends the run at the first anomaly the online check finds.
	stopOnAnomaly bool
	// programs are the server executables the user chose (--<program>).
	programs catalog.Programs
	// changed reports whether the user gave a flag.
	changed func(name string) bool
	// backendFlags copy the run's topology's own flags into its
	// settings, apply the other flags into its configuration.
	backendFlags catalog.BoundFlags
	apply        []func(*harness.Config) error
	// client is the lock client program to test instead of a backend.
	client clientFlags
	// target, once resolved, is the lock the run tests, when it is not a
	// backend of the catalog (a lock client program: useClient, or a
	// compare cell's).
	target *catalog.Backend
}

func newRunCmd() *cobra.Command {
	cmd, _ := runCommand()
	return cmd
}

// plannedRun is a run as its flags configure it, preflighted: what run's
// PreRunE leaves for its RunE (and for a test that parses a command line
// without running it).
type plannedRun struct {
	f   runFlags
	cfg harness.Config
}

// runCommand is the run command and the run it plans from its flags.
func runCommand() (*cobra.Command, *plannedRun) {
	p := &plannedRun{}
	f := &p.f
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run a test against a real lock service and check it",
		Long: `run starts the lock service's servers on loopback (or, with --runtime docker,
as containers on a private network of their own), spawns one worker process
per client, runs the workload for --time-limit while the nemesis injects
faults, heals every fault, checks the history and writes a run directory
(<out>/<timestamp>-<backend>-<workload>, with <out>/latest pointing at it)
holding history.jsonl, resource.jsonl, results.json, junit.xml, report.html
and every node's and worker's log.

Faults (--nemesis, comma-separated):
` + faultHelp() + `
Exit codes: 0 the verdict is true, 1 it is false, 2 it is unknown or the run
could not be done.`,
		Example: `  lockcheck run
  lockcheck run --backend redis --workload unfenced --nemesis pause-holder --ttl 500ms --time-limit 20s --seed 1
  lockcheck run --variant setnx-expire --nemesis kill-client
  lockcheck run --client 'python3 my_lock.py' --topology redis --nemesis pause-holder
  lockcheck images build && lockcheck run --runtime docker --backend sentinel --nemesis partition --pause 5s`,
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return p.plan(cmd) },
		RunE:    func(cmd *cobra.Command, _ []string) error { return runTest(cmd, p) },
	}
	fl := cmd.Flags()
	addTestFlags(fl, f)
	addRunFlags(fl, f, 20*time.Second)
	return cmd, p
}

// addTestFlags declares the flags that say what one test runs (backend,
// variant, workload, faults), which run and soak share.
func addTestFlags(fl *pflag.FlagSet, f *runFlags) {
	fl.StringVar(&f.backend, "backend", catalog.DefaultBackend, "lock backend: "+strings.Join(catalog.Names(), ", "))
	fl.StringVar(&f.variant, "variant", "", "backend variant; for redis: correct (SET NX PX, Lua release), setnx-expire (SETNX then EXPIRE), del-release (release by plain DEL); empty picks the backend's correct one")
	fl.StringVar(&f.workload, "workload", harness.Defaults.Run.Workload, "fenced (the resource refuses a write with a stale fence) or unfenced (every write lands)")
	fl.StringVar(&f.nemesis, "nemesis", "pause-holder", "faults to inject, comma-separated, or none")
	addClientFlags(fl, &f.client)
}

// useClient makes the --client program, if given, the lock the run
// tests.
func (f *runFlags) useClient() error {
	b, ok, err := f.client.target(f.changed)
	if ok {
		f.backend, f.variant, f.target = b.Name, catalog.ClientVariant, &b
	}
	return err
}

// resolve is the lock the run tests and its variant.
func (f runFlags) resolve() (catalog.Backend, string, error) {
	if f.target != nil {
		return *f.target, catalog.ClientVariant, nil
	}
	return catalog.Lookup(f.backend, f.variant)
}

// addRunFlags declares the flags run and compare share: everything but what
// a run tests (backend, variant, workload, faults). limit is the default
// --time-limit.
func addRunFlags(fl *pflag.FlagSet, f *runFlags, limit time.Duration) {
	fl.StringVar(&f.fenceSource, "fence-source", harness.Defaults.Run.FenceSource, "where fences come from: lock (the backend's own: INCR for the Redis backends, unsafe for Redlock, whose nodes forget; --workload fenced is refused for a lock that hands out none), resource (after each grant the client draws the next number of the resource's own strictly increasing sequence: safe with every backend) or none")
	fl.StringVar(&f.resource, "resource", harness.Defaults.Run.Resource, "the protected resource: memory (lockcheck's own in-memory store, exact ground truth) or postgres (a row of a real PostgreSQL database started as node pg-0: the fenced write is UPDATE ... WHERE fence_token < $fence AND read_fence <= $fence, and an audit table written in the same transaction is the ground truth)")
	fl.DurationVar(&f.ttl, "ttl", harness.Defaults.TTL, "lease length of the lock (at least 1ms)")
	fl.DurationVar(&f.limit, "time-limit", limit, "how long the workload runs (at least the --ttl)")
	fl.Var(&pauseFlag{f: f}, "pause", "how long a pause fault lasts (0: twice the lease the backend grants for --ttl, so a paused holder outlives its lease); a range such as 100ms-900ms or @FILE (measured pauses in ms, one per line, such as a GC log's) draws each fault's pause from that distribution")
	fl.DurationVar(&f.interval, "nemesis-interval", 0, "time between faults (0: the greatest pause plus one second, or, when a pause would then not end within --time-limit, half the time the run has beside one pause)")
	fl.StringVar(&f.think, "think", harness.Defaults.Think, "time a client works inside the lock, drawn for each critical section: a duration, a range such as 10ms-50ms, or @FILE (measured work times in ms, one per line)")
	fl.DurationVar(&f.retry, "retry", harness.Defaults.Retry, "pause of a client after the lock was refused to it")
	fl.DurationVar(&f.opTimeout, "op-timeout", harness.Defaults.OpTimeout, "time limit of each operation; one that runs out has an unknown outcome")
	fl.DurationVar(&f.linTimeout, "linearizability-timeout", 10*time.Second, "time limit of the linearizability check; when it runs out the result is unknown, never a pass")
	fl.BoolVar(&f.stopOnAnomaly, "stop-on-anomaly", false, "end the run (healing every fault, as at the time limit) within a second of the first anomaly the online check finds; the verdict is still the check of the whole recorded history")
	fl.IntVar(&f.clients, "clients", 5, "number of client processes (at most what the machine can run: its memory over 64 MiB a client, and half of ulimit -u)")
	fl.IntVar(&f.keys, "keys", harness.Defaults.Run.Keys, "number of lock keys the clients contend for")
	fl.Int64Var(&f.seed, "seed", 0, "seed of the fault schedule and the clients' choices (0: pick one and print it)")
	fl.StringVar(&f.out, "out", "store", "directory that holds run directories")
	f.programs = catalog.Programs{}
	programFlags(fl, f.programs)
	f.changed = fl.Changed
	f.backendFlags = catalog.BindFlags(fl)
	for _, hook := range runFlagHooks {
		f.apply = append(f.apply, hook(fl))
	}
}

// programFlags declares a flag for each server program a backend needs
// (--<program>), which sets its executable in programs.
func programFlags(fl *pflag.FlagSet, programs catalog.Programs) {
	for _, p := range catalog.AllPrograms() {
		fl.Var(programFlag{programs, p.Name}, p.Name, p.Name+" executable (looked up on PATH)")
	}
}

// programFlag sets one program of a Programs map from a flag.
type programFlag struct {
	p    catalog.Programs
	name string
}

func (f programFlag) String() string     { return f.p.Path(f.name) }
func (f programFlag) Set(v string) error { f.p[f.name] = v; return nil }
func (f programFlag) Type() string       { return "string" }

// runFlagHooks let a fault's or runtime's own file add flags to run: bind
// declares them and returns a function that copies their values into the
// run's configuration (usually its Params) once the flags are parsed. A
// backend's own flags come from the catalog (catalog.Flags) instead.
//
// The node-restart flags come first, from a variable's initializer rather
// than an init.
var runFlagHooks = []func(fl *pflag.FlagSet) (apply func(cfg *harness.Config) error){restartFlags}

func restartFlags(fl *pflag.FlagSet) func(*harness.Config) error {
	wipe := fl.Bool("wipe", false, "kill-restart: the node comes back with its data wiped")
	delay := fl.Duration("restart-delay", 0, "kill-restart: time between the kill and the restart (the documented Redlock mitigation is longer than the TTL)")
	return func(cfg *harness.Config) error {
		cfg.Run.Params[nemesis.ParamWipe] = strconv.FormatBool(*wipe)
		cfg.Run.Params[nemesis.ParamRestartDelay] = delay.String()
		// A node that keeps nothing on disk always comes back empty, and
		// the history should say so.
		if cfg.Target.Diskless {
			if fl.Changed("wipe") && !*wipe {
				return fmt.Errorf("--wipe=false: %s nodes keep nothing on disk, so a restarted node always comes back empty; drop --wipe=false (use --restart-delay for the documented mitigation)", cfg.Run.Backend)
			}
			cfg.Run.Params[nemesis.ParamWipe] = "true"
		}
		return nil
	}
}

func faultHelp() string {
	var b strings.Builder
	names := append([]string{"none"}, nemesis.Names()...)
	width := 0
	for _, name := range names {
		width = max(width, len(name))
	}
	for _, name := range names {
		fmt.Fprintf(&b, "  %-*s %s\n", width, name, nemesis.Help(name))
	}
	return b.String()
}

// plan configures the run from its flags (a lock client program
// registered as its backend), picking a seed when none was given, and
// preflights it.
func (p *plannedRun) plan(cmd *cobra.Command) error {
	if err := p.f.useClient(); err != nil {
		return err
	}
	faults, err := nemesis.Parse(p.f.nemesis)
	if err != nil {
		return err
	}
	if p.f.seed == 0 {
		p.f.seed = harness.PickSeed()
	}
	p.cfg, err = p.f.config(faults, reproduce(cmd, p.f.seed))
	return err
}

func runTest(cmd *cobra.Command, p *plannedRun) error {
	f, cfg := p.f, p.cfg
	stdout := cmd.OutOrStdout()
	fmt.Fprintf(stdout, "lockcheck: %s/%s, %s workload, nemesis %s, seed %d, %s\n",
		f.backend, cfg.Run.Variant, f.workload, orNone(cfg.Run.Nemesis), f.seed, f.limit)
	opts := checker.Options{LinearizabilityTimeout: f.linTimeout}
	online := newOnlineCheck(opts, cfg.Run.Fenced(), f.stopOnAnomaly)
	go online.follow()
	defer online.close()
	cfg.OnProgress = online.progress(progressLine(cmd.ErrOrStderr(), ""))
	cfg.Stop = online.stop

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out, v, err := runAndCheck(ctx, cfg, results.CheckDir, opts, stdout, cmd.ErrOrStderr())
	switch {
	case err != nil:
		return err
	case out.Interrupted:
		// The verdict of an interrupted run is unknown unless a safety
		// check failed, as lockcheck check of its directory says too.
		fmt.Fprintln(cmd.ErrOrStderr(), "lockcheck: interrupted; the verdict covers the part of the run that was recorded")
	}
	return verdictExit(v)
}

// config is the plan of a run of f.backend/f.variant with f.workload
// under faults: the flags mapped into a request (request), which
// harness.NewPlan defaults and checks.
func (f runFlags) config(faults []string, commandLine []string) (harness.Config, error) {
	req, err := f.request(faults, commandLine)
	if err != nil {
		return req, err
	}
	return harness.NewPlan(req)
}

// request maps the flags into the request of a run of f.backend/f.variant
// with f.workload under faults.
func (f runFlags) request(faults []string, commandLine []string) (harness.Config, error) {
	switch f.fenceSource {
	case workloads.FenceFromLock, workloads.FenceFromResource, workloads.FenceNone:
	default:
		return harness.Config{}, fmt.Errorf("--fence-source %q: choose lock, resource or none", f.fenceSource)
	}
	backend, variant, err := f.resolve()
	if err != nil {
		return harness.Config{}, err
	}
	settings := catalog.Settings{Topology: backend.Topology(), Program: backend.Client != nil, Faults: faults, TTL: f.ttl, Params: map[string]string{}, Changed: f.changed}
	if err := f.backendFlags.Apply(&settings); err != nil {
		return harness.Config{}, err
	}
	think, err := workloads.ParseDistribution(f.think)
	if err != nil {
		return harness.Config{}, fmt.Errorf("--think: %w", err)
	}
	if !f.pauses.Fixed() {
		f.pause = f.pauses.Max // what everything that outwaits a pause waits for
	}
	// The request: harness.NewPlan defaults it (the pause that outlasts
	// the lease the backend grants, the time between faults) and checks it.
	cfg := harness.Config{
		Run: history.RunConfig{
			Backend: f.backend, Variant: variant, Workload: f.workload, FenceSource: f.fenceSource, Resource: f.resource,
			Nemesis: faults, Seed: f.seed, Clients: f.clients, Keys: f.keys, Think: think.String(), CommandLine: commandLine,
		},
		Target: backend, Out: f.out, Programs: maps.Clone(f.programs),
		TTL: f.ttl, Limit: f.limit, Pause: f.pause, Pauses: f.pauses, Interval: f.interval,
		Think: think.String(), Retry: f.retry, OpTimeout: f.opTimeout, Logger: slog.Default(),
	}
	cfg.Run.Params = settings.Params
	for _, apply := range f.apply {
		if err := apply(&cfg); err != nil {
			return harness.Config{}, err
		}
	}
	return cfg, nil
}

// pauseFlag is --pause: one duration, or a distribution each fault draws
// its pause from. Its type is a duration's, so that a single value is held
// to --pause's rule (validateFlags) like any duration.
type pauseFlag struct {
	f    *runFlags
	text string // as given, to print the command line back
}

func (p *pauseFlag) String() string {
	if p.text == "" {
		return p.f.pause.String()
	}
	return p.text
}

func (p *pauseFlag) Type() string { return "duration" }

func (p *pauseFlag) Set(s string) error {
	d, err := parsePause(s)
	if err != nil {
		return err
	}
	p.f.pause, p.f.pauses, p.text = d.Min, workloads.Distribution{}, s
	if !d.Fixed() {
		p.f.pause, p.f.pauses = 0, d
	}
	return nil
}

// parsePause reads one --pause value: a duration, or a distribution whose
// longest pause is at least minPause (a single duration is held to
// --pause's rule by validateFlags).
func parsePause(s string) (workloads.Distribution, error) {
	d, err := workloads.ParseDistribution(s)
	if err != nil {
		return d, err
	}
	if !d.Fixed() && d.Max < minPause {
		return d, fmt.Errorf("%q: the longest pause is %s, shorter than %s: such a pause stops a process for less than a scheduler tick", s, d.Max, minPause)
	}
	return d, nil
}

// runAndCheck runs one test, then checks whatever it recorded, even when the
// run failed or was interrupted (with check), and writes the results into
// its run directory. The summary goes to summary, the progress line's end
// to progress.
func runAndCheck(ctx context.Context, cfg harness.Config, check dirCheck, opts checker.Options, summary, progress io.Writer) (harness.Outcome, checker.Validity, error) {
	out, runErr := harness.Run(ctx, cfg)
	clearProgress(progress)
	var (
		startInterrupted *harness.StartInterrupted
		notStarted       *harness.ClientsNotStarted
	)
	if out.Dir == "" || errors.As(runErr, &startInterrupted) {
		return out, checker.Unknown, runErr // nothing ran: nothing to check
	}
	if errors.As(runErr, &notStarted) {
		// The workload never began: the program's own words are the
		// message, and its logs are in the run directory.
		return out, checker.Unknown, fmt.Errorf("%v (logs in %s)", runErr, notStarted.Logs)
	}
	var refused *harness.Refused
	if errors.As(runErr, &refused) {
		// The lock broke a rule the run cannot go on without: that is the
		// one line to say, and what was recorded stays in its directory.
		return out, checker.Unknown, fmt.Errorf("%v (the run stopped at once; what it recorded is in %s)", runErr, out.Dir)
	}
	// Whatever happened, check what was recorded: nothing is lost.
	if _, err := os.Stat(filepath.Join(out.Dir, results.HistoryFile)); err != nil {
		if runErr != nil {
			return out, checker.Unknown, fmt.Errorf("%v (run directory %s)", runErr, out.Dir)
		}
		return out, checker.Unknown, err
	}
	v, err := checkDir(out.Dir, check, opts, summary)
	switch {
	case out.RecordingFailed != nil && err != nil:
		return out, v, fmt.Errorf("%v; the run stopped there, and its results could not be written either: %v", out.RecordingFailed, err)
	case out.RecordingFailed != nil:
		return out, v, fmt.Errorf("%v; the run stopped there, and what was recorded is checked in %s (verdict %s)", out.RecordingFailed, out.Dir, v)
	case runErr != nil:
		return out, v, fmt.Errorf("%v (what was recorded is checked in %s)", runErr, out.Dir)
	case err != nil:
		return out, v, err
	}
	return out, v, nil
}

func orNone(faults []string) string {
	if len(faults) == 0 {
		return "none"
	}
	return strings.Join(faults, ",")
}

// progressReporter draws a live line on a terminal and logs a plain line
// every few seconds otherwise. label, if set, says which run of several
// this is (compare's cell).
func progressReporter(w io.Writer, label string) func(harness.Progress) {
	line := progressLine(w, label)
	return func(p harness.Progress) { line(p, "") }
}

// progressLine is progressReporter with a last part, extra, that the
// caller supplies each time (the online check's anomalies).
func progressLine(w io.Writer, label string) func(harness.Progress, string) {
	f, ok := w.(*os.File)
	tty := ok && isTerminal(f)
	if label != "" {
		label += "  "
	}
	return func(p harness.Progress, extra string) {
		if extra != "" {
			extra = ", " + extra
		}
		rate := 0.0
		if s := p.Elapsed.Seconds(); s > 0 {
			rate = float64(p.Grants) / s
		}
		if tty {
			fmt.Fprintf(w, "\r  %s%4.0fs / %.0fs   grants %d (%.0f/s)   faults %d%s ", label, p.Elapsed.Seconds(), p.Limit.Seconds(), p.Grants, rate, p.Faults, extra)
			return
		}
		if int(p.Elapsed.Round(time.Second).Seconds())%5 == 0 {
			fmt.Fprintf(w, "progress: %s%s / %s, grants %d (%.0f/s), faults %d%s\n", label, p.Elapsed.Round(time.Second), p.Limit, p.Grants, rate, p.Faults, extra)
		}
	}
}

func clearProgress(w io.Writer) {
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		fmt.Fprint(w, "\r\033[K")
	}
}
