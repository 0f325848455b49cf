package harness

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/nemesis"
	"github.com/lockcheck/lockcheck/workloads"
)

// Config is one run.
type Config struct {
	// Run is what the run is (backend, workload, faults, seed, clients,
	// params, ...), as its history header records it. Its durations are
	// not set here: the header's are derived from the ones below (record).
	Run history.RunConfig
	// Target is the lock the run tests, resolved once from the command
	// line or the scenario (catalog.Resolve): a lock client program is a
	// target of its own, in no registry. Zero: the backend Run.Backend
	// names, looked up in the catalog.
	Target   catalog.Backend
	Out      string // the store the run directory goes under
	Programs catalog.Programs
	// Addrs, if set, are the client addresses of a lock service that is
	// already running: the run starts no nodes, and only faults that need
	// none can run. KeyPrefix then starts every lock key, and the keys are
	// deleted at the end where the backend can (a backends.Cleaner).
	Addrs     []string
	KeyPrefix string
	// TTL is the lease the clients ask for (--ttl). Lease is the one the
	// backend really grants for it (catalog.Backend.GrantedLease: etcd
	// rounds it up, ZooKeeper clamps it to its ticks), which everything
	// that waits out or judges against a lease uses; zero is the
	// backend's, which Run asks the catalog for.
	TTL, Lease time.Duration
	Limit      time.Duration
	Pause      time.Duration
	// Pauses, when not fixed, is the distribution each fault draws its
	// pause from (--pause 100ms-900ms, --pause @gc.txt); Pause is then its
	// greatest, which everything that must outwait a pause uses.
	Pauses   workloads.Distribution
	Interval time.Duration // between nemesis steps
	// Script, if set, replaces the seeded fault schedule with an exact
	// timeline (a scenario).
	Script []nemesis.Action
	// Steps, if not nil, is the fault schedule instead of the one drawn
	// from Run.Seed (a soak draws one for its whole duration; a segmented
	// run cuts it at the boundaries, nemesis.Window).
	Steps []nemesis.Step
	// Segment, if positive, rotates the run's history into segments of
	// this length while its clients go on (a soak; Limit is the whole
	// run's). At each boundary the segment's faults heal, every client
	// finishes its cycle and waits before its next acquire, the lease the
	// backend grants is waited out so that no lease outlives the segment,
	// and the segment's run directory is closed; the next one's history
	// header carries what the segment leaves (history.SegmentHead), and
	// the clients go on.
	// The fault schedule is cut at the boundaries (nemesis.Window).
	Segment time.Duration
	// SegmentDone, if set, is called with each segment's number (from 1)
	// and run directory once its history and resource log are closed,
	// the last one's included, before Run returns. It runs on the run's
	// goroutine: it must hand long work on.
	SegmentDone func(n int, dir string)
	// LogDir, if set, is where the nodes' logs (nodes/) and the workers'
	// (logs/) go instead of the run directory: a segmented run's segment
	// directories are handed on as they close, its processes are not.
	LogDir string
	Think  string
	Retry  time.Duration
	// OpTimeout bounds each operation of a client.
	OpTimeout time.Duration
	// Executable is the lockcheck binary started as workers; os.Executable
	// by default.
	Executable string
	// WorkerEnv is extra environment of every worker process (a test
	// binary's workers learn from it which test started them).
	WorkerEnv []string
	// InProcess runs the clients as goroutines of this process instead of
	// worker processes. A SIGSTOP cannot stop a goroutine: a pause of such
	// a client is a stall at the next failpoint it reaches (right away for
	// a client already held at one), and it cannot be killed. For tests
	// that trade the real fault for speed (package locktest).
	InProcess bool
	Logger    *slog.Logger
	// OnProgress, if set, is called about once a second.
	OnProgress func(Progress)
	// Stop, if set, ends the workload when it is closed, as the time
	// limit does: clients stop, faults heal, the run is not interrupted
	// (--stop-on-anomaly).
	Stop <-chan struct{}

	// createLog creates the history and the resource log; nil creates the
	// file. Tests give a writer that fails as a full disk does.
	createLog func(path string) (io.WriteCloser, error)
	// planned says NewPlan made this configuration: defaulted, resolved
	// and checked.
	planned bool
}

// Progress is a live view of a run.
type Progress struct {
	// Dir is the run directory, whose history is being written.
	Dir string
	// Segment is the number of the segment being recorded, from 1, in a
	// segmented run (Config.Segment); 0 otherwise. Elapsed, Limit,
	// Grants and Faults are then the segment's.
	Segment        int
	Elapsed, Limit time.Duration
	Grants         int64
	Faults         int64
}

// Outcome is what a run left behind.
type Outcome struct {
	Dir         string
	Interrupted bool
	// StepsNotRun are the indices of a script's steps that never ran
	// because the run ended first.
	StepsNotRun []int
	// RecordingFailed is the first write of the history or the resource
	// log that failed (a full disk); it stopped the run, which is then
	// also Interrupted.
	RecordingFailed error
}

// createFile creates a log of the run directory; it must not exist yet.
func createFile(path string) (io.WriteCloser, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
}

// Preflight checks what can be checked before anything starts: the backend,
// the variant, the workload, the faults and the server programs.
func Preflight(cfg Config) (catalog.Backend, error) {
	b, err := cfg.target()
	if err != nil {
		return b, err
	}
	if cfg.Run.Workload != workloads.Fenced && cfg.Run.Workload != workloads.Unfenced {
		return b, fmt.Errorf("unknown workload %q (choose fenced or unfenced)", cfg.Run.Workload)
	}
	if _, err := workloads.ParseDistribution(cfg.Think); err != nil {
		return b, fmt.Errorf("--think: %w", err)
	}
	if err := CheckFaults(cfg, b); err != nil {
		return b, err
	}
	if err := checkProgramLinks(cfg, b); err != nil {
		return b, err
	}
	if err := checkFenceSource(cfg, b); err != nil {
		return b, err
	}
	if cfg.Run.Clients < 1 || cfg.Run.Keys < 1 {
		return b, errors.New("--clients and --keys must be at least 1")
	}
	if err := preflightResource(cfg, b); err != nil {
		return b, err
	}
	if err := checkTimings(cfg); err != nil {
		return b, err
	}
	return b, preflightRuntime(cfg, b, nodeSpecs(cfg, b))
}

// target is the lock the run tests: Config.Target, or the backend
// Run.Backend names.
func (cfg Config) target() (catalog.Backend, error) {
	if cfg.Target.Name == "" {
		b, _, err := catalog.Lookup(cfg.Run.Backend, cfg.Run.Variant)
		return b, err
	}
	if cfg.Target.Name != cfg.Run.Backend || (cfg.Run.Variant != "" && !slices.Contains(cfg.Target.Variants, cfg.Run.Variant)) {
		return cfg.Target, fmt.Errorf("the run records backend %s/%s, but tests %s (variants %s)", cfg.Run.Backend, cfg.Run.Variant, cfg.Target.Name, strings.Join(cfg.Target.Variants, ", "))
	}
	return cfg.Target, nil
}

// checkTimings refuses durations that would make a run test nothing: a
// TTL, time limit, operation timeout or retry pause that is not positive
// (every acquire refused, no operation allowed to finish), or a negative
// pause or fault interval (the nemesis silently off). The command line
// says the same per flag; this guards every other caller.
func checkTimings(cfg Config) error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"TTL", cfg.TTL}, {"time limit", cfg.Limit}, {"operation timeout", cfg.OpTimeout}, {"retry pause", cfg.Retry}} {
		if d.v <= 0 {
			return fmt.Errorf("the %s must be positive, not %s", d.name, d.v)
		}
	}
	if cfg.Lease < 0 {
		return fmt.Errorf("the lease the backend grants must be positive, or zero for the backend's own, not %s", cfg.Lease)
	}
	if cfg.Pause < 0 || (cfg.Script == nil && len(cfg.Run.Nemesis) > 0 && cfg.Interval <= 0) {
		return fmt.Errorf("the pause (%s) and the time between faults (%s) must be positive", cfg.Pause, cfg.Interval)
	}
	if cfg.Segment < 0 || (cfg.Segment > 0 && cfg.Script != nil) {
		return fmt.Errorf("a run can be cut into segments (%s) only when it is not a scenario, and a segment must be positive", cfg.Segment)
	}
	return nil
}

// checkFenceSource refuses a fenced run whose fence source yields no
// fence: the resource would refuse every write, and the run would pass
// having tested nothing.
func checkFenceSource(cfg Config, b catalog.Backend) error {
	if !cfg.Run.Fenced() {
		return nil
	}
	switch cfg.Run.FenceSource {
	case workloads.FenceNone:
		return fmt.Errorf("--workload fenced with --fence-source none: no write would carry a fence, and the resource would refuse every one; use --fence-source resource (the resource's own sequence, safe with every backend)")
	case workloads.FenceFromLock, "":
		if !b.HandsOutFences(cfg.Run.Variant) && b.Client != nil {
			// A program declares its fences in init_ok, not in Go.
			return fmt.Errorf("--workload fenced with --fence-source lock: lock client program %s hands out no fence (its init_ok does not say supports.fence), so the resource would refuse every write; use --fence-source resource (the resource's own sequence, safe with every lock), or have the program send supports.fence: true in init_ok and a fence with every acquire_ok if its lock hands one out (docs/clients.md)",
				cfg.Run.Backend)
		}
		if !b.HandsOutFences(cfg.Run.Variant) {
			return fmt.Errorf("--workload fenced with --fence-source lock: backend %s (variant %s) hands out no fence, so the resource would refuse every write; use --fence-source resource (the resource's own sequence, safe with every backend), or declare the lock's fences (lockcheck.Backend.Fences) if its grants carry one",
				cfg.Run.Backend, cfg.Run.Variant)
		}
	}
	return nil
}

// checkPrograms finds the server programs a backend's local processes run
// in a run with params.
func checkPrograms(programs catalog.Programs, b catalog.Backend, params map[string]string) error {
	for _, p := range b.Programs {
		if !p.NeededBy(params) {
			continue
		}
		if _, err := p.Find(programs.Path(p.Name)); err != nil {
			return err
		}
	}
	return nil
}

// prepare plans cfg if NewPlan did not (the plan is defaulted and checked
// once) and fills in what a plan leaves to Run: the worker executable,
// the logger and how the logs are created.
func prepare(cfg Config) (Config, catalog.Backend, error) {
	cfg, err := planned(cfg)
	if err != nil {
		return cfg, cfg.Target, err
	}
	backend := cfg.Target
	if cfg.Executable == "" {
		if cfg.Executable, err = os.Executable(); err != nil {
			return cfg, backend, err
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.createLog == nil {
		cfg.createLog = createFile
	}
	return cfg, backend, nil
}

// record is what a history header of the run records, its time limit
// limit (a segment's, in a segmented run): Config.Run, with the durations
// derived from the typed ones, here and nowhere else.
func (cfg Config) record(limit time.Duration) history.RunConfig {
	run := cfg.Run
	run.TTLms, run.LeaseMs = cfg.TTL.Milliseconds(), cfg.Lease.Milliseconds()
	run.TimeLimitMs, run.PauseMs = limit.Milliseconds(), cfg.Pause.Milliseconds()
	if !cfg.Pauses.Fixed() {
		run.PauseDistribution = cfg.Pauses.String()
	}
	run.NemesisEveryMs = 0
	if cfg.Script == nil {
		// A scenario's timeline has no interval between faults.
		run.NemesisEveryMs = cfg.Interval.Milliseconds()
	}
	return run
}

// segmentLimit is the time limit of segment n (from 1): Config.Segment,
// the last one shorter when Limit is not a multiple of it; Limit for a run
// in one piece.
func (cfg Config) segmentLimit(n int) time.Duration {
	if cfg.Segment <= 0 {
		return cfg.Limit
	}
	return min(cfg.Segment, cfg.Limit-time.Duration(n-1)*cfg.Segment)
}

// grace bounds how long a client may take to finish its cycle when asked
// to stop or to wait at a boundary.
func (cfg Config) grace() time.Duration { return cfg.Pause + 3*cfg.OpTimeout + 2*time.Second }

// ParamNames are every run param a run records and reads, sorted: the
// backends' own (catalog.ParamNames), the faults' (nemesis.Fault.Params),
// the client loop's, the runtime's and its images', and a run against a
// service that is already running. A scenario's params are refused
// unless named here.
func ParamNames() []string {
	names := []string{ParamAddr, ParamKeyPrefix, ParamRuntime, ParamNetwork, workloads.ParamWatchdog, nemesis.ParamWipe, nemesis.ParamRestartDelay}
	names = append(names, catalog.ParamNames()...)
	for _, n := range nemesis.Names() {
		if f, ok := nemesis.Lookup(n); ok {
			names = append(names, f.Params...)
		}
	}
	for _, img := range catalog.Images() {
		names = append(names, img.Param())
	}
	slices.Sort(names)
	return slices.Compact(names)
}
