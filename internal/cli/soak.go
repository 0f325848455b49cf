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
		Long: `soak runs the test of lockcheck run for --duration, cut into segments of
--segment each. The lock service's nodes are started once and kept up for
the whole soak (their logs in the soak directory's nodes/), and the faults
follow one schedule drawn from the seed for the whole duration. Every
segment is a run of its own on them (its workers, with the seed plus the
segment's number less one, and its resource start afresh), is checked
online as it is recorded (the progress line shows its anomalies so far)
and once more when it ends, as it is read, and is then archived in the
soak directory (<out>/<timestamp>-soak-<backend>-<workload>):

  history-0001.jsonl.zst, resource-0001.jsonl.zst   zstd-compressed
  results-0001.json                                  the segment's results.json
  report-0001.html                                   its report and timeline, for
                                                     the first segment with each
                                                     kind of anomaly
  soak.json, junit.xml                               rewritten after each segment

A segment's clients start with nothing held and nothing in flight, so each
segment is checkable on its own: lockcheck check history-0001.jsonl.zst.
The soak directory's size follows the number of segments, not their
events, and lockcheck's memory follows the clients and keys. With
--resource postgres each segment starts the nodes afresh, as lockcheck run
does (a database resource kept up would carry its value into the next
segment); with --addr the service is yours and stays up throughout.

With --stop-on-anomaly the segment that finds the first anomaly ends
there (as at its time limit), is archived, and the soak stops.

Ctrl-C ends the current segment as at its time limit (healing every fault),
checks and archives it; a crash loses only the segment being run.

--backends and --workloads make a matrix of soaks, run one after the other,
each into its own soak directory; --shard I/N runs a deterministic share of
it, as compare --shard does.

Exit codes: 0 every segment's verdict is true, 1 one is false, 2 one is
unknown or the soak could not be done (of a matrix: the worst soak's).`,
		Example: `  lockcheck soak --duration 8h --segment 10m --backend redis --nemesis pause-holder
  lockcheck soak --duration 20s --segment 5s --workload fenced --seed 1
  lockcheck soak --duration 8h --segment 10m --backends redis,etcd --workloads fenced,unfenced --shard 2/4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return soak(cmd, f) },
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
	targets := []target{{f.backend, f.variant}}
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
			c.backend, c.variant, c.workload = t.backend, t.variant, w
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
		f.seed = time.Now().UnixNano()%1_000_000 + 1
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
		switch {
		case v == checker.Invalid:
			worst = checker.Invalid
		case v == checker.Unknown && worst == checker.Valid:
			worst = checker.Unknown
		}
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
	cfg, err := f.config(faults, reproduce(cmd, f.seed))
	if err != nil {
		return plannedSoak{}, err
	}
	if _, err := harness.Preflight(cfg); err != nil {
		return plannedSoak{}, err
	}
	return plannedSoak{f: f, cfg: cfg, faults: faults}, nil
}

// soakOne runs one soak; it returns its verdict and whether it was
// interrupted.
func soakOne(cmd *cobra.Command, p plannedSoak) (checker.Validity, bool, error) {
	f, cfg, faults := p.f, p.cfg, p.faults
	dir := filepath.Join(f.out, time.Now().Format("20060102T150405")+"-soak-"+f.backend+"-"+f.workload)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return checker.Unknown, false, err
	}
	// The segments' run directories live in a folder of their own until
	// they are archived.
	cfg.Out = filepath.Join(dir, "running")
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
	if harness.KeepsCluster(cfg) {
		cluster, err := harness.StartCluster(ctx, cfg, filepath.Join(dir, "nodes"))
		var startInterrupted *harness.StartInterrupted
		switch {
		case errors.As(err, &startInterrupted):
			// Ctrl-C before anything ran: no segment starts.
		case err != nil:
			return checker.Unknown, false, err
		default:
			defer cluster.Close()
			cfg.Cluster = cluster
		}
	}
	// One schedule of faults for the whole soak; each segment runs its
	// window of it.
	plan := nemesis.Plan(f.seed, faults, cfg.Interval, f.duration)
	opts := checker.Options{LinearizabilityTimeout: f.linTimeout}
	for n, left := 1, f.duration; left > 0 && ctx.Err() == nil; n++ {
		limit := min(f.segment, left)
		from := f.duration - left
		left -= limit
		seg := cfg
		seg.Limit, seg.Run.TimeLimitMs = limit, limit.Milliseconds()
		seg.Run.Seed = f.seed + int64(n-1)
		seg.Steps = nemesis.Window(plan, from, from+limit)
		label := fmt.Sprintf("segment %d", n)
		out, checked, err := runSegment(ctx, seg, opts, f.stopOnAnomaly, cmd, label)
		var startInterrupted *harness.StartInterrupted
		if errors.As(err, &startInterrupted) {
			// Ctrl-C before the segment's workload started: nothing ran.
			if out.Dir != "" {
				os.RemoveAll(out.Dir)
			}
			break
		}
		if out.Dir == "" {
			if err == nil {
				err = errors.New("the segment left no run directory")
			}
			if werr := sum.Write(dir); werr != nil {
				return checker.Unknown, false, werr
			}
			return checker.Unknown, false, fmt.Errorf("%s: %w (the finished segments are in %s)", label, err, dir)
		}
		archived, aerr := sum.ArchiveSegment(dir, out.Dir, n, cfg.Run.Fenced(), checked.h, checked.res)
		if out.Interrupted {
			sum.Interrupt()
		}
		if werr := sum.Write(dir); aerr == nil {
			aerr = werr
		}
		if aerr != nil {
			return checker.Unknown, false, fmt.Errorf("%s: archiving %s: %w", label, out.Dir, aerr)
		}
		fmt.Fprintf(stdout, "%s: %s, %d events, %d grants, anomalies %v, faults %d/%d landed -> %s\n",
			label, archived.Valid, archived.Events, archived.Grants, archived.Anomalies, archived.Landed, archived.Faults, archived.History)
		if err != nil {
			return checker.Unknown, false, fmt.Errorf("%s: %w (the finished segments are in %s)", label, err, dir)
		}
		if f.stopOnAnomaly && len(archived.Anomalies) > 0 {
			fmt.Fprintf(stdout, "%s found an anomaly: the soak stops (--stop-on-anomaly)\n", label)
			break
		}
	}
	// Every segment is archived: what is left is the link to the latest.
	if err := os.RemoveAll(cfg.Out); err != nil {
		return checker.Unknown, false, err
	}
	if ctx.Err() != nil && !sum.Interrupted {
		// Ctrl-C between two segments: the soak is cut short all the same.
		sum.Interrupt()
		if err := sum.Write(dir); err != nil {
			return checker.Unknown, false, err
		}
	}
	if sum.Interrupted {
		fmt.Fprintln(stderr, "lockcheck soak: interrupted; every finished segment is archived and checkable")
	}
	fmt.Fprintf(stdout, "soak %s: %d segments, %d with anomalies, %d grants, faults %d/%d landed; %s\n",
		sum.Valid, len(sum.Segments), sum.AnomalySegments, sum.Grants, sum.FaultsLanded, sum.FaultsInjected, filepath.Join(dir, results.SoakFile))
	return sum.Valid, sum.Interrupted, nil
}

// runSegment runs and checks one segment as lockcheck run does, with the
// online check on its progress line (ending the segment at its first
// anomaly when stopOnAnomaly), but checked as it is read whatever its
// length (results.CheckDirStreamed), so that the soak's memory follows
// its clients and keys; the summary of its check is dropped (the soak
// prints a line per segment). It returns what the check found, for the
// archive.
func runSegment(ctx context.Context, cfg harness.Config, opts checker.Options, stopOnAnomaly bool, cmd *cobra.Command, label string) (harness.Outcome, segmentCheck, error) {
	online := newOnlineCheck(opts, cfg.Run.Fenced(), stopOnAnomaly)
	go online.follow()
	defer online.close()
	cfg.OnProgress = online.progress(progressLine(cmd.ErrOrStderr(), label))
	cfg.Stop = online.stop
	var checked segmentCheck
	out, _, err := runAndCheck(ctx, cfg, checked.check, opts, io.Discard, cmd.ErrOrStderr())
	return out, checked, err
}

// segmentCheck is a segment's check: the excerpt of its history and the
// result, which its report in the archive is drawn from.
type segmentCheck struct {
	h   *history.History
	res *checker.Result
}

func (c *segmentCheck) check(dir string, opts checker.Options) (*history.History, *checker.Result, error) {
	var err error
	c.h, c.res, err = results.CheckDirStreamed(dir, opts)
	return c.h, c.res, err
}
