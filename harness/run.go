// Package harness runs one lockcheck test from start to finish: it brings
// the lock service's nodes up through a runtime (local processes, or
// containers in package container), starts the resource and one worker
// process per client (package workerproc), drives the nemesis, records the
// history, heals every fault and tears everything down, whatever happens.
package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/harness/workerproc"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/nemesis"
	"github.com/lockcheck/lockcheck/results"
	"github.com/lockcheck/lockcheck/workloads"
	"github.com/lockcheck/lockcheck/workloads/resource"
)

// Config is one run.
type Config struct {
	Run      history.RunConfig // what the history header records
	Out      string            // the store the run directory goes under
	Programs catalog.Programs
	// Extra carries backend-specific client settings.
	Extra map[string]string
	// Addrs, if set, are the client addresses of a lock service that is
	// already running: the run starts no nodes, and only faults that need
	// none can run. KeyPrefix then starts every lock key, and the keys are
	// deleted at the end where the backend can (a backends.Cleaner).
	Addrs     []string
	KeyPrefix string
	TTL       time.Duration
	Limit     time.Duration
	Pause     time.Duration
	Interval  time.Duration // between nemesis steps
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
	// finishes its cycle and waits before its next acquire, the TTL is
	// waited out so that no lease outlives the segment, and the segment's
	// run directory is closed; the next one's history header carries what
	// the segment leaves (history.SegmentHead), and the clients go on.
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
	b, _, err := catalog.Lookup(cfg.Run.Backend, cfg.Run.Variant)
	if err != nil {
		return b, err
	}
	if cfg.Run.Workload != workloads.Fenced && cfg.Run.Workload != workloads.Unfenced {
		return b, fmt.Errorf("unknown workload %q (choose fenced or unfenced)", cfg.Run.Workload)
	}
	if _, err := workloads.ParseRange(cfg.Think); err != nil {
		return b, fmt.Errorf("--think: %w", err)
	}
	if err := CheckFaults(cfg, b); err != nil {
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
	if cfg.Pause < 0 || (cfg.Script == nil && len(cfg.Run.Nemesis) > 0 && cfg.Interval <= 0) {
		return fmt.Errorf("the pause (%s) and the time between faults (%s) must be positive", cfg.Pause, cfg.Interval)
	}
	if cfg.Segment < 0 || (cfg.Segment > 0 && cfg.Script != nil) {
		return fmt.Errorf("a run can be cut into segments (%s) only when it is not a scenario, and a segment must be positive", cfg.Segment)
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

// readyWait bounds the wait for a topology to serve as a whole. It is
// generous: a wait that ends as soon as the service is ready costs a fast
// machine nothing, and a busy one (six containers of a Sentinel topology
// starting beside other work) can take well over half a minute.
const readyWait = 2 * time.Minute

// Run runs one test. It always tears down what it started; the run
// directory keeps whatever was recorded, even when Run returns an error or
// ctx is cancelled (Ctrl-C).
func Run(ctx context.Context, cfg Config) (out Outcome, err error) {
	backend, err := Preflight(cfg)
	if err != nil {
		return out, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Executable == "" {
		if cfg.Executable, err = os.Executable(); err != nil {
			return out, err
		}
	}
	out.Dir, err = results.NewRunDir(cfg.Out, cfg.Run.Backend, cfg.Run.Workload, time.Now())
	if err != nil {
		return out, err
	}
	p := newProcs()
	defer p.killAll(5 * time.Second) // also on panic: no child outlives the run

	if cfg.createLog == nil {
		cfg.createLog = createFile
	}
	// The in-memory resource logs as it goes. A database's audit table is
	// written out at the end: a run killed before that leaves no log, and
	// the checks read the writes from the history, rather than an empty
	// log that would say no write happened.
	var memory *resource.Server
	if resourceOf(cfg) == resource.Memory {
		resLog, err := cfg.createLog(filepath.Join(out.Dir, results.ResourceFile))
		if err != nil {
			return out, err
		}
		if memory, err = resource.Serve(resLog, cfg.Run.Fenced()); err != nil {
			return out, err
		}
		defer memory.Close()
	}

	logDir := out.Dir
	if cfg.LogDir != "" {
		logDir = cfg.LogDir
		if err := os.MkdirAll(filepath.Join(logDir, results.LogsDir), 0o755); err != nil {
			return out, err
		}
	}
	specs, nodesDir := nodeSpecs(cfg, backend), filepath.Join(logDir, "nodes")
	top, err := startTopologyFor(ctx, cfg, p, specs, nodesDir, log)
	if err != nil {
		return out, interrupted(ctx, err, nodeNames(specs))
	}
	defer top.close()
	nodes, eps := top.servers, top.endpoints()
	for i, n := range nodes {
		log.Info("node ready", "node", n.Name(), "addr", eps[i].Addr())
	}
	if backend.Ready != nil && len(cfg.Addrs) == 0 {
		readyCtx, cancel := context.WithTimeout(ctx, readyWait)
		err := backend.Ready(readyCtx, eps)
		cancel()
		if err != nil && ctx.Err() != nil {
			return out, &StartInterrupted{What: "the " + cfg.Run.Backend + " topology"}
		}
		if err != nil {
			return out, fmt.Errorf("%s topology did not become ready: %w (node logs in %s)", cfg.Run.Backend, err, nodesDir)
		}
	}
	if backend.PrepareAddrs != nil && len(cfg.Addrs) > 0 {
		if err := backend.PrepareAddrs(ctx, cfg.Addrs); err != nil {
			return out, fmt.Errorf("preparing the %s service at %s: %w", cfg.Run.Backend, strings.Join(cfg.Addrs, ","), err)
		}
	}
	var db *database
	if memory == nil {
		if db, err = startDatabase(ctx, cfg, p, eps, nodesDir, lockKeys(cfg)); err != nil {
			return out, err
		}
		defer db.stop()
	}
	cfg.Run.Versions = map[string]string{}
	for i := range nodes {
		if specs[i].Version == nil {
			continue
		}
		if v, err := specs[i].Version(ctx, eps[i].Addr()); err == nil {
			cfg.Run.Versions[top.versionKey(i)] = v
		}
	}

	// A variant that needs the resource writes it in the lock's transaction.
	cfg.Run.WritesInLockTx = backend.RequiresResource[cfg.Run.Variant] != ""
	segLimit := cfg.Limit
	if cfg.Segment > 0 {
		segLimit = min(cfg.Segment, cfg.Limit)
	}
	h, err := createHistory(cfg, out.Dir, segLimit, nil)
	if err != nil {
		return out, err
	}
	defer func() { h.Close() }() // the last segment's

	spec := catalog.Spec{
		Backend: cfg.Run.Backend, Variant: cfg.Run.Variant, TTL: cfg.TTL, Addrs: cfg.Addrs,
		Fence: cfg.Run.FenceSource == "lock", Timeout: cfg.OpTimeout, Extra: cfg.Run.Params,
	}
	if len(cfg.Addrs) == 0 {
		spec.Addrs = backend.Addrs(eps)
	}
	f := &fleet{
		cfg: cfg, procs: p, hist: h, nodes: nodes, links: top.links, log: log, dir: out.Dir, logDir: logDir,
		fences: map[string]int64{}, recordingStopped: make(chan struct{}),
	}
	resWatchDone := make(chan struct{})
	defer close(resWatchDone)
	if memory != nil {
		go func() {
			select {
			case <-memory.Failed():
				f.recordingFailed(results.ResourceFile, memory.Err())
			case <-resWatchDone:
			}
		}()
	}
	if backend.Service != nil && len(cfg.Addrs) == 0 {
		f.service = backend.Service(eps)
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		if w, ok := f.service.(serviceWatcher); ok {
			if err := w.Watch(watchCtx, f.recordNemesis); err != nil {
				log.Warn("watching the lock service", "err", err)
			}
		}
	}()
	// The watcher records into the history, so it stops before the run's
	// last event (also when Run returns early).
	defer func() { stopWatching(); <-watchDone }()
	f.base = workerproc.Config{
		Lock: spec, Stride: cfg.Run.Clients, Keys: lockKeys(cfg), Think: cfg.Think,
		Retry: cfg.Retry, OpTimeout: cfg.OpTimeout, Resource: resourceOf(cfg), FenceSource: cfg.Run.FenceSource,
		Fenced:   cfg.Run.Fenced(),
		Watchdog: cfg.Run.Params[workloads.ParamWatchdog] == "true",
	}
	if memory != nil {
		f.base.ResourceAddr = memory.Addr()
	} else {
		f.base.ResourceAddr = db.addr
	}
	for i := 0; i < cfg.Run.Clients; i++ {
		if err := f.spawn(i, history.Process(i)); err != nil {
			f.stop(time.Second)
			return out, err
		}
	}
	start := time.Now()
	log.Info("workload started", "clients", cfg.Run.Clients, "limit", cfg.Limit)
	// Checked by Preflight; an error here leaves the defaults.
	settings, _ := nemesis.ParseSettings(cfg.Run.Params)
	env := nemesis.Env{
		Targets: f, Record: f.recordNemesis, Pause: cfg.Pause, TTL: cfg.TTL, OpTimeout: cfg.OpTimeout,
		Failpoints: backend.Failpoints[cfg.Run.Variant], Patience: cfg.Interval, Settings: settings,
	}
	if f.links != nil {
		env.Network = f
	}
	steps := cfg.Steps
	if steps == nil && cfg.Script == nil {
		steps = nemesis.Plan(cfg.Run.Seed, cfg.Run.Nemesis, cfg.Interval, cfg.Limit)
	}
	// grace bounds how long a client may take to finish its cycle when
	// asked to stop or wait.
	grace := cfg.Pause + 3*cfg.OpTimeout + 2*time.Second
	segment, segStart, from := 1, start, time.Duration(0)
	for {
		limit := min(segLimit, cfg.Limit-from)
		nemCtx, stopNemesis := context.WithCancel(ctx)
		nemDone := make(chan error, 1)
		go func() {
			if cfg.Script != nil {
				nemDone <- nemesis.RunScript(nemCtx, cfg.Script, start, env)
				return
			}
			nemDone <- nemesis.Run(nemCtx, nemesis.Window(steps, from, from+limit), segStart, env)
		}()
		ending := f.waitLimit(ctx, segment, segStart, limit)
		stopNemesis()
		var notRun *nemesis.NotRun
		if nerr := <-nemDone; errors.As(nerr, &notRun) {
			out.StepsNotRun = notRun.Steps // the scenario reports them
		} else if nerr != nil {
			log.Warn("nemesis", "err", nerr)
		}
		out.Interrupted = ending == endInterrupted
		from += limit
		if ending != endLimit || from >= cfg.Limit {
			break
		}
		next, resume, err := f.nextSegment(ctx, segment, grace, spec, memory, db)
		if err != nil {
			// The run ends here, as at its time limit: ctx ended (Ctrl-C
			// while the clients were waiting), or the recording failed.
			out.Interrupted = true
			break
		}
		if cfg.SegmentDone != nil {
			cfg.SegmentDone(segment, out.Dir)
		}
		out.Dir = next
		segment, segStart = segment+1, time.Now()
		resume()
	}
	f.stop(grace)
	f.inspect(spec)
	if len(cfg.Addrs) > 0 {
		f.clean(spec)
	}
	stopWatching()
	<-watchDone
	detail := ""
	if out.Interrupted {
		detail = history.RunEndInterrupted
	}
	if out.RecordingFailed = f.recordingError(); out.RecordingFailed != nil {
		out.Interrupted = true
		detail = history.RunEndInterrupted + ": " + out.RecordingFailed.Error()
	}
	f.recordNemesis(history.NemRunEnd, history.Value{Detail: detail})
	var exportErr error
	out.Dir = f.currentDir()
	if db != nil {
		// The database's audit table is the ground truth: written out
		// whatever ctx says, since the workers have stopped.
		exportCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, exportErr = db.export(exportCtx, cfg.createLog, filepath.Join(out.Dir, results.ResourceFile))
	}
	f.histMu.Lock()
	closeErr := f.hist.Close()
	f.histMu.Unlock()
	if memory != nil {
		// The resource log is complete once the resource stops.
		memory.Close()
	}
	if cfg.SegmentDone != nil {
		cfg.SegmentDone(segment, out.Dir)
	}
	switch {
	case exportErr != nil:
		return out, fmt.Errorf("writing the resource log from the database: %w", exportErr)
	case closeErr != nil && out.RecordingFailed == nil:
		return out, closeErr
	}
	return out, nil
}

// createHistory creates the history of the run directory dir, its
// header recording a time limit of limit and, for a later segment of a
// segmented run, what it carries over (head).
func createHistory(cfg Config, dir string, limit time.Duration, head *history.SegmentHead) (*history.Writer, error) {
	histLog, err := cfg.createLog(filepath.Join(dir, results.HistoryFile))
	if err != nil {
		return nil, err
	}
	run := cfg.Run
	run.TimeLimitMs = limit.Milliseconds()
	h, err := history.NewWriter(histLog, history.Header{
		Started: time.Now().UTC().Format(time.RFC3339), StartTime: history.Now(), Config: run, Head: head,
	})
	if err != nil {
		histLog.Close()
		return nil, fmt.Errorf("recording %s failed: %w", results.HistoryFile, err)
	}
	return h, nil
}

// serviceWatcher is a backend's service handle that reports what the
// service does on its own while the test runs (a Sentinel promoting a
// replica, a node changing role); each report is a nemesis event, so the
// report shows who led when, whatever caused the change.
type serviceWatcher interface {
	Watch(ctx context.Context, record func(verb string, v history.Value)) error
}

// fleet is the set of worker processes; it is the nemesis's view of the
// running test.
type fleet struct {
	cfg   Config
	procs *procs
	hist  *history.Writer
	nodes []server
	log   *slog.Logger
	// logDir holds the workers' logs (logs/): the run directory, or
	// Config.LogDir.
	logDir string
	base   workerproc.Config
	// service is the backend's service-level handle for the nemesis, if any.
	service any
	// links cut (and slow) single links between clients and nodes, if the
	// run can.
	links links

	// histMu orders appends with a segment boundary's swap of hist; fences
	// is the highest fence granted per key so far (what a segment hands
	// on, history.SegmentHead).
	histMu sync.Mutex
	fences map[string]int64

	mu sync.Mutex
	// dir is the run directory being recorded (a segment's, in a
	// segmented run).
	dir string
	// holding is set while the clients wait at a segment boundary: a
	// worker started then starts parked.
	holding  bool
	slots    []*worker
	stopping bool
	running  sync.WaitGroup
	grants   atomic.Int64
	refusals atomic.Int64 // acquires the service would not write at all
	faults   atomic.Int64

	// recordingStopped is closed at the first failed write of the history
	// or the resource log: the run stops as at its time limit.
	recordingStopped chan struct{}
	recordErr        error
}

// append records a client's event; a write that fails stops the run.
func (f *fleet) append(e history.Event) {
	f.histMu.Lock()
	_, err := f.hist.Append(e)
	if e.Type == history.OK && e.F == history.FAcquire && e.Value != nil && e.Value.Fence != nil {
		if high, ok := f.fences[e.Key]; !ok || *e.Value.Fence > high {
			f.fences[e.Key] = *e.Value.Fence
		}
	}
	f.histMu.Unlock()
	if err != nil {
		f.recordingFailed(results.HistoryFile, err)
	}
}

// recordingFailed stops the run at the first failed write of file. Every
// later write fails too (the history writer and the resource refuse all
// once one failed), and only the first is reported: by the caller of Run,
// in one line.
func (f *fleet) recordingFailed(file string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.recordErr != nil {
		return
	}
	f.recordErr = fmt.Errorf("recording %s failed: %w", file, err)
	close(f.recordingStopped)
}

func (f *fleet) recordingError() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.recordErr
}

func (f *fleet) spawn(slot int, process history.Process) error {
	wc := f.base
	wc.Process = int(process)
	f.mu.Lock()
	wc.Held = f.holding
	f.mu.Unlock()
	wc.Seed = uint64(f.cfg.Run.Seed)*1000003 + uint64(process)
	if f.links != nil {
		source, err := f.links.source(slot)
		if err != nil {
			return err
		}
		wc.Lock.Source = source
	}
	raw, err := json.Marshal(wc)
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(f.logDir, results.LogsDir, fmt.Sprintf("worker-%d.log", slot)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	var (
		w      *worker
		stdout io.Reader
	)
	if f.cfg.InProcess {
		w, stdout, err = startInProcess(wc, logf)
	} else {
		w, stdout, err = f.startProcess(raw, logf)
	}
	if err != nil {
		logf.Close()
		return fmt.Errorf("starting worker %d: %w", slot, err)
	}
	w.slot, w.process, w.holding, w.keepParked = slot, process, map[string]bool{}, wc.Held
	f.mu.Lock()
	for len(f.slots) <= slot {
		f.slots = append(f.slots, nil)
	}
	f.slots[slot] = w
	f.mu.Unlock()
	f.running.Add(1)
	go f.follow(w, stdout, logf)
	return nil
}

// startProcess starts a worker as lockcheck itself again (the user's
// executable, or a test binary) with the configuration raw.
func (f *fleet) startProcess(raw []byte, logf *os.File) (*worker, io.Reader, error) {
	cmd := exec.Command(f.cfg.Executable, "worker")
	cmd.Env = append(append(os.Environ(), f.cfg.WorkerEnv...), WorkerEnv+"="+string(raw))
	cmd.Stderr = logf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := f.procs.start(cmd); err != nil {
		return nil, nil, err
	}
	return &worker{cmd: cmd, stdin: stdin, pid: cmd.Process.Pid}, stdout, nil
}

// follow records a worker's events until it exits, then replaces it if the
// run is still going: a killed client comes back as a new process.
func (f *fleet) follow(w *worker, stdout io.Reader, logf *os.File) {
	defer f.running.Done()
	defer logf.Close()
	rerr := readMessages(stdout, func(m workerproc.Message) {
		e := w.observe(m)
		if e == nil {
			return
		}
		if e.Type == history.OK && e.F == history.FAcquire {
			f.grants.Add(1)
		}
		if e.Type == history.Fail && e.F == history.FAcquire && e.Value != nil && e.Value.Refused {
			f.refusals.Add(1)
		}
		f.append(*e)
	})
	werr := w.wait(f.procs)
	reason := "worker process exited"
	if werr != nil {
		reason = "worker process died: " + werr.Error()
	}
	if rerr != nil {
		reason += " (" + rerr.Error() + ")"
	}
	if e := w.died(reason); e != nil {
		f.append(*e)
	}
	f.mu.Lock()
	stopping := f.stopping
	f.mu.Unlock()
	if stopping {
		return
	}
	f.log.Info("worker died; restarting", "slot", w.slot, "reason", reason)
	next := w.nextProcess(f.cfg.Run.Clients)
	if err := f.spawn(w.slot, next); err != nil {
		f.log.Error("restarting worker", "slot", w.slot, "err", err)
		return
	}
	f.recordNemesis(history.NemStart, history.Value{Target: next.String(), PID: f.slot(w.slot).pid})
}

func (f *fleet) slot(i int) *worker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.slots[i]
}

func (f *fleet) recordNemesis(verb string, v history.Value) {
	if history.VerbOf(verb).Role == history.Starts {
		f.faults.Add(1)
	}
	f.append(history.Event{Time: history.Now(), Process: history.Nemesis, Type: history.Info, F: verb, Value: &v})
}

// How a segment's wait ended.
type ending int

const (
	endLimit       ending = iota // its time limit
	endStop                      // Config.Stop: the run ends as at its limit
	endInterrupted               // ctx, or a failed recording
)

// waitLimit waits out segment n's time limit, from start, reporting
// progress.
func (f *fleet) waitLimit(ctx context.Context, n int, start time.Time, limit time.Duration) ending {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	if f.cfg.Segment <= 0 {
		n = 0
	}
	// Progress counts the segment's grants and faults.
	grants, faults := f.grants.Load(), f.faults.Load()
	for {
		select {
		case <-ctx.Done():
			return endInterrupted
		case <-f.recordingStopped:
			return endInterrupted
		case <-timer.C:
			return endLimit
		case <-f.cfg.Stop:
			return endStop
		case <-tick.C:
			if f.cfg.OnProgress != nil {
				f.mu.Lock()
				dir := f.dir
				f.mu.Unlock()
				f.cfg.OnProgress(Progress{Dir: dir, Segment: n, Elapsed: time.Since(start), Limit: limit, Grants: f.grants.Load() - grants, Faults: f.faults.Load() - faults})
			}
		}
	}
}

// stop asks every worker to finish its cycle and exit, and kills those that
// do not within grace.
func (f *fleet) stop(grace time.Duration) {
	f.mu.Lock()
	f.stopping = true
	workers := append([]*worker(nil), f.slots...)
	f.mu.Unlock()
	for _, w := range workers {
		if w != nil {
			w.Signal(syscall.SIGCONT) //nolint:errcheck // a paused client must run to stop
			w.send(workerproc.CmdStop)
			w.stdin.Close()
		}
	}
	done := make(chan struct{})
	go func() { f.running.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		f.log.Warn("workers did not stop in time; killing them")
		for _, w := range workers {
			if w != nil {
				w.Signal(syscall.SIGKILL) //nolint:errcheck // gone already is fine
			}
		}
		<-done
	}
}

// inspect records the state of every lock key on the service after the
// clients stopped: a key that outlived its holders is evidence.
func (f *fleet) inspect(spec catalog.Spec) {
	lock, err := catalog.Open(spec, nil)
	if err != nil {
		return
	}
	defer lock.Close()
	for _, key := range f.base.Keys {
		ctx, cancel := context.WithTimeout(context.Background(), f.cfg.OpTimeout)
		desc, session, err := backends.Inspect(ctx, lock, key)
		cancel()
		if err != nil {
			desc = key + ": could not inspect: " + err.Error()
		}
		f.recordNemesis(history.NemInspect, history.Value{Target: key, Detail: desc, Session: session})
	}
}

// Holder implements nemesis.Targets.
func (f *fleet) Holder() (nemesis.Client, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.slots {
		if w != nil && w.holds() {
			return w, true
		}
	}
	return nil, false
}

// Clients implements nemesis.Targets.
func (f *fleet) Clients() []nemesis.Client {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []nemesis.Client
	for _, w := range f.slots {
		if w != nil {
			out = append(out, w)
		}
	}
	return out
}

// Lookup implements nemesis.Targets: nodes by name, clients as c<slot>.
func (f *fleet) Lookup(name string) (nemesis.Target, bool) {
	for _, n := range f.nodes {
		if n.Name() == name {
			return n, true
		}
	}
	var slot int
	if _, err := fmt.Sscanf(name, "c%d", &slot); err == nil && fmt.Sprintf("c%d", slot) == name {
		f.mu.Lock()
		defer f.mu.Unlock()
		if slot >= 0 && slot < len(f.slots) && f.slots[slot] != nil {
			return f.slots[slot], true
		}
	}
	return nil, false
}

// Service implements nemesis.Targets.
func (f *fleet) Service() any { return f.service }

// Nodes implements nemesis.Targets.
func (f *fleet) Nodes() []nemesis.Target {
	out := make([]nemesis.Target, len(f.nodes))
	for i, n := range f.nodes {
		out[i] = n
	}
	return out
}
