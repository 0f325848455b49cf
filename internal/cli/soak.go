package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/nemesis"
	"github.com/lockcheck/lockcheck/results"
)

// soakFlags are run's flags plus the soak's length and its segments', and
// the matrix of soaks and the shard of it to run.
type soakFlags struct {
	runFlags
	duration, segment          time.Duration
	backends, workloads, shard string
}

func newSoakCmd() *cobra.Command {
	var f soakFlags
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Run a test for hours, cut into segments checked as they finish",
		Long: `soak runs the test of lockcheck run for --duration as one run, its history
rotated into segments of --segment each while the clients go on. The lock
service's nodes and the client processes stay up for the whole soak (their
logs in the soak directory's nodes/ and logs/), and the faults follow one
schedule drawn from the seed for the whole duration.

At each boundary the segment's faults heal, every client finishes its cycle
and waits before its next acquire, and the lease the backend grants for the
TTL is waited out, so that no lease, pending operation or fault crosses
into the next segment; the history and the resource log then move to the next segment's files, whose
header carries what the segment leaves (each key's highest fence, and the
resource's value and highest written fence: docs/history.md), and the
clients go on. Each segment is checked online as it is recorded (the
progress line shows its anomalies so far), checked once more as soon as it
closes, as it is read, while the next runs, and archived in the soak
directory (<out>/<timestamp>-soak-<backend>-<workload>):

  history-0001.jsonl.zst, resource-0001.jsonl.zst   zstd-compressed
  results-0001.json                                  the segment's results.json
  report-0001.html                                   its report and timeline, for
                                                     the first segment with each
                                                     kind of anomaly
  soak.json, junit.xml                               rewritten after each segment

Each segment is checkable on its own, its head included: lockcheck check
history-0002.jsonl.zst. The soak directory's size follows the number of
segments, not their events, and lockcheck's memory follows the clients and
keys.

With --stop-on-anomaly the soak ends (as at its time limit) within about
a second of the first anomaly found: by the online check, in the segment
being recorded, or by the check of a closed segment, in the next one.

Ctrl-C ends the soak in the current segment as at its time limit (healing
every fault), and checks and archives it; after a crash every closed
segment is archived or in running/, checkable.

--backends and --workloads make a matrix of soaks, run one after the other,
each into its own soak directory; --shard I/N runs a deterministic share of
it, as compare --shard does.

Exit codes: 0 every segment's verdict is true, 1 one is false, 2 one is
unknown or the soak could not be done (of a matrix: the worst soak's).`,
		Example: `  lockcheck soak --duration 8h --segment 10m --backend redis --nemesis pause-holder
  lockcheck soak --duration 20s --segment 5s --workload fenced --seed 1
  lockcheck soak --duration 8h --segment 10m --backends redis,etcd --workloads fenced,unfenced --shard 2/4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.useClient(); err != nil {
				return err
			}
			return soak(cmd, f)
		},
	}
	fl := cmd.Flags()
	addTestFlags(fl, &f.runFlags)
	addRunFlags(fl, &f.runFlags, 10*time.Minute)
	// --segment is each segment's time limit.
	if err := fl.MarkHidden("time-limit"); err != nil {
		panic(err)
	}
	fl.DurationVar(&f.duration, "duration", time.Hour, "how long the whole soak runs (its segments' time limits add up to it)")
	fl.DurationVar(&f.segment, "segment", 10*time.Minute, "how long each segment runs; the last one may be shorter")
	fl.StringVar(&f.backends, "backends", "", "a matrix of soaks, one after the other: backends, comma-separated, each NAME or NAME/VARIANT (instead of --backend and --variant), times --workloads")
	fl.StringVar(&f.workloads, "workloads", "", "a matrix of soaks: workloads, comma-separated, fenced and/or unfenced (instead of --workload), times --backends")
	fl.StringVar(&f.shard, "shard", "", "run only shard I of N of the matrix of soaks (I/N, such as 2/3): the soaks whose place in the matrix (backends in --backends' order, then workloads), counted from 0, leaves I-1 divided by N")
	return cmd
}

// validate refuses flags a soak cannot run with, in one line each.
func (f soakFlags) validate() error {
	switch {
	case f.changed("time-limit"):
		return errors.New("--time-limit: a soak runs for --duration, in segments of --segment; drop --time-limit")
	case f.duration <= 0:
		return fmt.Errorf("--duration %s: give a positive duration, such as 8h", f.duration)
	case f.segment <= 0:
		return fmt.Errorf("--segment %s: give a positive duration, such as 10m", f.segment)
	case f.segment > f.duration:
		return fmt.Errorf("--segment %s is longer than --duration %s: give a segment no longer than the soak", f.segment, f.duration)
	case f.backends != "" && (f.changed("backend") || f.changed("variant")):
		return errors.New("--backends and --backend/--variant: give the backends of the matrix in --backends alone")
	case f.workloads != "" && f.changed("workload"):
		return errors.New("--workloads and --workload: give the workloads of the matrix in --workloads alone")
	}
	return nil
}

// matrix is the soaks the flags ask for, backends then workloads, and of
// them the shard's share; without --backends and --workloads it is the
// one soak of --backend, --variant and --workload.
func (f soakFlags) matrix() ([]soakFlags, error) {
	targets := []target{{backend: f.backend, variant: f.variant, program: f.target}}
	if f.backends != "" {
		var err error
		if targets, err = parseTargets(f.backends); err != nil {
			return nil, err
		}
	}
	workloads := []string{f.workload}
	if f.workloads != "" {
		var err error
		if workloads, err = parseWorkloads(f.workloads); err != nil {
			return nil, err
		}
	}
	sh, err := parseShard(f.shard)
	if err != nil {
		return nil, err
	}
	var cells []soakFlags
	for _, t := range targets {
		for _, w := range workloads {
			c := f
			c.backend, c.variant, c.target, c.workload = t.backend, t.variant, t.program, w
			cells = append(cells, c)
		}
	}
	return shareOf(sh, cells), nil
}

// soak runs the soaks of the matrix (usually one) one after the other;
// Ctrl-C ends the matrix with the soak it interrupted. The exit code is
// the worst verdict's.
func soak(cmd *cobra.Command, f soakFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	cells, err := f.matrix()
	if err != nil {
		return err
	}
	if len(cells) == 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "lockcheck soak: shard %s has no soak: the matrix has fewer soaks than shards\n", f.shard)
		return nil
	}
	if f.seed == 0 {
		f.seed = harness.PickSeed()
	}
	// Every soak of the matrix is configured and preflighted before the
	// first starts: a missing program is not found hours in.
	planned := make([]plannedSoak, len(cells))
	for i, c := range cells {
		c.seed, c.limit = f.seed, f.segment
		if planned[i], err = c.plan(cmd); err != nil {
			return err
		}
	}
	worst := checker.Valid
	for _, p := range planned {
		v, interrupted, err := soakOne(cmd, p)
		if err != nil {
			return err
		}
		worst = worseVerdict(worst, v)
		if interrupted {
			break
		}
	}
	return verdictExit(worst)
}

// plannedSoak is one soak of the matrix, configured: its flags, the
// configuration each segment starts from, and its faults.
type plannedSoak struct {
	f      soakFlags
	cfg    harness.Config
	faults []string
}

// plan configures the soak of f and preflights it.
func (f soakFlags) plan(cmd *cobra.Command) (plannedSoak, error) {
	faults, err := nemesis.Parse(f.nemesis)
	if err != nil {
		return plannedSoak{}, err
	}
	req, err := f.request(faults, reproduce(cmd, f.seed))
	if err != nil {
		return plannedSoak{}, err
	}
	req.Limit, req.Segment = f.duration, f.segment
	cfg, err := harness.NewPlan(req)
	if err != nil {
		return plannedSoak{}, err
	}
	return plannedSoak{f: f, cfg: cfg, faults: faults}, nil
}

// soakOne runs one soak; it returns its verdict and whether it was
// interrupted.
func soakOne(cmd *cobra.Command, p plannedSoak) (checker.Validity, bool, error) {
	f, cfg, faults := p.f, p.cfg, p.faults
	dir, err := results.NewSoakDir(f.out, f.backend, f.workload, time.Now())
	if err != nil {
		return checker.Unknown, false, err
	}
	// The segments' run directories live in a folder of their own until
	// they are archived; the nodes' and workers' logs stay in the soak's.
	cfg.Out, cfg.LogDir = filepath.Join(dir, "running"), dir
	// One schedule of faults for the whole soak, cut at the segments'
	// boundaries.
	cfg.Steps = nemesis.Plan(f.seed, faults, cfg.Interval, f.duration)
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	fmt.Fprintf(stdout, "lockcheck soak: %s/%s, %s workload, nemesis %s, seed %d, %s in segments of %s, in %s\n",
		f.backend, cfg.Run.Variant, f.workload, orNone(faults), f.seed, f.duration, f.segment, dir)

	sum := results.NewSoak()
	sum.Backend, sum.Variant, sum.Workload, sum.Nemesis = f.backend, cfg.Run.Variant, f.workload, cfg.Run.Nemesis
	sum.Seed, sum.DurationMs, sum.SegmentMs = f.seed, f.duration.Milliseconds(), f.segment.Milliseconds()
	if sum.Nemesis == nil {
		sum.Nemesis = []string{}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := checker.Options{LinearizabilityTimeout: f.linTimeout}
	online := newOnlineCheck(opts, cfg.Run.Fenced(), f.stopOnAnomaly)
	go online.follow()
	defer online.close()
	cfg.OnProgress = online.progress(func(p harness.Progress, extra string) {
		progressLine(stderr, fmt.Sprintf("segment %d", p.Segment))(p, extra)
	})
	cfg.Stop = online.stop
	// Each segment is checked and archived as soon as it closes, while
	// the clients go on in the next.
	a := &segmentArchiver{
		dir: dir, sum: sum, opts: opts, fenced: cfg.Run.Fenced(), stdout: stdout, anomaly: online.found,
		queue: make(chan closedSegment, 64), done: make(chan struct{}),
	}
	go a.run()
	cfg.SegmentDone = func(n int, segDir string) { a.queue <- closedSegment{n, segDir} }
	out, runErr := harness.Run(ctx, cfg)
	clearProgress(stderr)
	close(a.queue)
	<-a.done
	var startInterrupted *harness.StartInterrupted
	startedNothing := errors.As(runErr, &startInterrupted) // Ctrl-C before the workload started
	interrupted := out.Interrupted || startedNothing
	if interrupted {
		sum.Interrupt()
	}
	if err := sum.Write(dir); err != nil {
		return checker.Unknown, false, err
	}
	switch {
	case runErr != nil && !startedNothing:
		return checker.Unknown, false, fmt.Errorf("%w (the finished segments are in %s)", runErr, dir)
	case out.RecordingFailed != nil:
		return checker.Unknown, false, fmt.Errorf("%w; the soak stopped there (the finished segments are in %s)", out.RecordingFailed, dir)
	case a.err != nil:
		return checker.Unknown, false, fmt.Errorf("%w (the finished segments are in %s)", a.err, dir)
	}
	// Every segment is archived: what is left is the link to the latest.
	if err := os.RemoveAll(cfg.Out); err != nil {
		return checker.Unknown, false, err
	}
	if interrupted {
		fmt.Fprintln(stderr, "lockcheck soak: interrupted; every finished segment is archived and checkable")
	}
	if online.stoppedRun() {
		fmt.Fprintf(stdout, "an anomaly was found: the soak stopped in segment %d (--stop-on-anomaly)\n", len(sum.Segments))
	}
	fmt.Fprintf(stdout, "soak %s: %d segments, %d with anomalies, %d grants, faults %d/%d landed; %s\n",
		sum.Valid, len(sum.Segments), sum.AnomalySegments, sum.Grants, sum.FaultsLanded, sum.FaultsInjected, filepath.Join(dir, results.SoakFile))
	return sum.Valid, sum.Interrupted, nil
}

// closedSegment is a segment whose history and resource log are closed.
type closedSegment struct {
	n   int
	dir string
}

// segmentArchiver checks and archives a soak's segments one at a time,
// in order, as they close (results.CheckDirStreamed: as each is read,
// so that the soak's memory follows its clients and keys), and rewrites
// soak.json and junit.xml after each. It stops at its first error,
// draining the rest.
type segmentArchiver struct {
	dir    string
	sum    *results.Soak
	opts   checker.Options
	fenced bool
	stdout io.Writer
	// anomaly is called when a segment's check found one (the online
	// check may have missed it at the segment's end).
	anomaly func()
	queue   chan closedSegment
	done    chan struct{}
	err     error
}

func (a *segmentArchiver) run() {
	defer close(a.done)
	for seg := range a.queue {
		if a.err == nil {
			a.err = a.archive(seg)
		}
	}
}

func (a *segmentArchiver) archive(seg closedSegment) error {
	label := fmt.Sprintf("segment %d", seg.n)
	var checked segmentCheck
	if _, err := checkDir(seg.dir, checked.check, a.opts, io.Discard); err != nil {
		return fmt.Errorf("%s: checking %s: %w", label, seg.dir, err)
	}
	archived, err := a.sum.ArchiveSegment(a.dir, seg.dir, seg.n, a.fenced, checked.h, checked.res)
	if werr := a.sum.Write(a.dir); err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("%s: archiving %s: %w", label, seg.dir, err)
	}
	fmt.Fprintf(a.stdout, "%s: %s, %d events, %d grants, anomalies %v, faults %d/%d landed -> %s\n",
		label, archived.Valid, archived.Events, archived.Grants, archived.Anomalies, archived.Landed, archived.Faults, archived.History)
	if len(archived.Anomalies) > 0 {
		a.anomaly()
	}
	return nil
}

// segmentCheck is a segment's check: the excerpt of its history and the
// result, which its report in the archive is drawn from.
type segmentCheck struct {
	h   *history.History
	res *checker.Result
}

func (c *segmentCheck) check(dir string, opts checker.Options, before ...results.BeforeWrite) (*history.History, *checker.Result, error) {
	var err error
	c.h, c.res, err = results.CheckDirStreamed(dir, opts, before...)
	return c.h, c.res, err
}
