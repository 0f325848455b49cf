// Package harness runs one lockcheck test from start to finish: it brings
// the lock service's nodes up through a runtime (local processes, or
// containers in package container), starts the resource and one worker
// process per client (package workerproc), drives the nemesis, records the
// history, heals every fault and tears everything down, whatever happens.
package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
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

// readyWait bounds the wait for a topology to serve as a whole. It is
// generous: a wait that ends as soon as the service is ready costs a fast
// machine nothing, and a busy one (six containers of a Sentinel topology
// starting beside other work) can take well over half a minute.
const readyWait = 2 * time.Minute

// Run runs one test in three phases: start brings everything up to the
// first client, drive runs the workload and the nemesis segment by
// segment, and finish stops the clients and closes the record. It always
// tears down what it started; the run directory keeps whatever was
// recorded, even when Run returns an error or ctx is cancelled (Ctrl-C).
func Run(ctx context.Context, cfg Config) (Outcome, error) {
	r := &run{cfg: cfg}
	defer r.teardown() // also on panic: no child outlives the run
	if err := r.start(ctx); err != nil {
		return r.out, err
	}
	return r.finish(r.drive(ctx))
}

// run is what the phases of one run share.
type run struct {
	cfg     Config
	backend catalog.Backend
	log     *slog.Logger
	out     Outcome

	procs *procs
	top   *topology
	// memory is the in-memory resource, db the database that keeps
	// --resource postgres: one of them is set.
	memory *resource.Server
	db     *database
	// spec is how a client opens the lock.
	spec  catalog.Spec
	rec   *recorder
	fleet *fleet
	// env is the nemesis's view of the run.
	env nemesis.Env
	// stopWatching stops the service watcher and waits for it; it may be
	// called again.
	stopWatching func()
	// undo tears down what start made, the last first (teardown).
	undo []func()
}

// teardown undoes what start made, the last first: it runs however Run
// ends, and after finish has nothing left to do but kill and remove.
func (r *run) teardown() {
	for i := len(r.undo) - 1; i >= 0; i-- {
		r.undo[i]()
	}
}

// start makes everything up to the workload: the run directory, the
// resource, the lock service (its nodes started and ready, or the service
// given with Config.Addrs prepared), the history and its recorder, the
// watcher of the service, and one client per slot, which begin at once.
func (r *run) start(ctx context.Context) error {
	cfg, backend, err := prepare(r.cfg)
	if err != nil {
		return err
	}
	r.cfg, r.backend, r.log = cfg, backend, cfg.Logger
	if r.out.Dir, err = results.NewRunDir(cfg.Out, cfg.Run.Backend, cfg.Run.Workload, time.Now()); err != nil {
		return err
	}
	r.procs = newProcs()
	r.undo = append(r.undo, func() { r.procs.killAll(5 * time.Second) })
	if err := r.startMemory(); err != nil {
		return err
	}
	logDir := r.out.Dir
	if cfg.LogDir != "" {
		logDir = cfg.LogDir
		if err := os.MkdirAll(filepath.Join(logDir, results.LogsDir), 0o755); err != nil {
			return err
		}
	}
	if err := r.startService(ctx, filepath.Join(logDir, "nodes")); err != nil {
		return err
	}
	r.spec = r.lockSpec()
	if err := r.probeClient(logDir); err != nil {
		// Refused before anything was recorded: the servers' data is no
		// run's to keep. It goes once teardown has stopped them (undo
		// runs last first); the probe's log stays, for the refusal names it.
		nodes := filepath.Join(logDir, "nodes")
		r.undo = append([]func(){func() {
			if err := os.RemoveAll(nodes); err != nil {
				r.log.Warn("remove the servers' data of a refused run", "dir", nodes, "err", err)
			}
		}}, r.undo...)
		return err
	}
	if err := r.startRecording(); err != nil {
		return err
	}
	return r.startClients(r.watchService(ctx), logDir)
}

// startMemory serves the in-memory resource, which logs as it goes. A
// database's audit table is written out at the end instead (startService
// starts the database): a run killed before that leaves no log, and the
// checks read the writes from the history, rather than an empty log that
// would say no write happened.
func (r *run) startMemory() error {
	if resourceOf(r.cfg) != resource.Memory {
		return nil
	}
	resLog, err := r.cfg.createLog(filepath.Join(r.out.Dir, results.ResourceFile))
	if err != nil {
		return err
	}
	if r.memory, err = resource.Serve(resLog, r.cfg.Run.Fenced()); err != nil {
		return err
	}
	r.undo = append(r.undo, func() { r.memory.Close() })
	return nil
}

// startService brings the lock service up, its nodes' directories under
// nodesDir, and waits until it serves as a whole; a service given with
// Config.Addrs is prepared instead. It then starts the database resource,
// if the run has one, and records the nodes' versions.
func (r *run) startService(ctx context.Context, nodesDir string) error {
	cfg, backend := r.cfg, r.backend
	specs := nodeSpecs(cfg, backend)
	top, err := startTopologyFor(ctx, cfg, r.procs, specs, nodesDir, r.log)
	if err != nil {
		return interrupted(ctx, err, nodeNames(specs))
	}
	r.top = top
	r.undo = append(r.undo, top.close)
	eps := top.endpoints()
	for _, e := range eps {
		r.log.Info("node ready", "node", e.Name, "addr", e.Addr())
	}
	if backend.Ready != nil && len(cfg.Addrs) == 0 {
		readyCtx, cancel := context.WithTimeout(ctx, readyWait)
		err := backend.Ready(readyCtx, eps)
		cancel()
		if err != nil && ctx.Err() != nil {
			return &StartInterrupted{What: "the " + cfg.Run.Backend + " topology"}
		}
		if err != nil {
			return fmt.Errorf("%s topology did not become ready: %w (node logs in %s)", cfg.Run.Backend, err, nodesDir)
		}
	}
	if backend.PrepareAddrs != nil && len(cfg.Addrs) > 0 {
		if err := backend.PrepareAddrs(ctx, cfg.Addrs); err != nil {
			return fmt.Errorf("preparing the %s service at %s: %w", cfg.Run.Backend, strings.Join(cfg.Addrs, ","), err)
		}
	}
	if resourceOf(cfg) != resource.Memory {
		if r.db, err = startDatabase(ctx, cfg, r.procs, eps, nodesDir, lockKeys(cfg)); err != nil {
			return err
		}
		r.undo = append(r.undo, r.db.stop)
	}
	r.cfg.Run.Versions = map[string]string{}
	for i, e := range eps {
		if specs[i].Version == nil {
			continue
		}
		if v, err := specs[i].Version(ctx, e.Addr()); err == nil {
			key := top.versionKey(i)
			if had, ok := r.cfg.Run.Versions[key]; ok && had != v {
				// Two nodes of one program that run different servers
				// (lockcheck itself as a PostgreSQL node and as its pooler).
				key += " (" + e.Name + ")"
			}
			r.cfg.Run.Versions[key] = v
		}
	}
	// A variant that needs the resource writes it in the lock's transaction.
	r.cfg.Run.WritesInLockTx = backend.RequiresResource[cfg.Run.Variant] != ""
	return nil
}

// startRecording creates the first segment's history and its recorder,
// which a failure of the in-memory resource's log stops too.
func (r *run) startRecording() error {
	h, err := createHistory(r.cfg, r.out.Dir, r.cfg.segmentLimit(1), nil)
	if err != nil {
		return err
	}
	r.rec = newRecorder(h, r.out.Dir)
	r.undo = append(r.undo, func() { r.rec.close() })
	if r.memory != nil {
		done := make(chan struct{})
		go func() {
			select {
			case <-r.memory.Failed():
				r.rec.failed(results.ResourceFile, r.memory.Err())
			case <-done:
			}
		}()
		r.undo = append(r.undo, func() { close(done) })
	}
	return nil
}

// watchService returns the backend's service handle, nil for a service
// lockcheck did not start, and records what the service reports of itself
// until stopWatching.
func (r *run) watchService(ctx context.Context) any {
	var service any
	if r.backend.Service != nil && len(r.cfg.Addrs) == 0 {
		service = r.backend.Service(r.top.endpoints())
	}
	watchCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if w, ok := service.(serviceWatcher); ok {
			if err := w.Watch(watchCtx, r.rec.nemesis); err != nil {
				r.log.Warn("watching the lock service", "err", err)
			}
		}
	}()
	// The watcher records into the history, so it stops before the run's
	// last event (also when Run returns early).
	r.stopWatching = func() { cancel(); <-done }
	r.undo = append(r.undo, r.stopWatching)
	return service
}

// serviceWatcher is a backend's service handle that reports what the
// service does on its own while the test runs (a Sentinel promoting a
// replica, a node changing role); each report is a nemesis event, so the
// report shows who led when, whatever caused the change.
type serviceWatcher interface {
	Watch(ctx context.Context, record func(verb string, v history.Value)) error
}

// startClients starts one worker per client slot, their logs in logDir,
// and gives the nemesis its view of them, the nodes, service and the
// run's links (env).
func (r *run) startClients(service any, logDir string) error {
	cfg := r.cfg
	r.fleet = &fleet{
		cfg: cfg, procs: r.procs, rec: r.rec, nodes: r.top.servers, service: service, log: r.log, logDir: logDir, links: r.top.links,
		base: workerproc.Config{
			Lock: r.spec, Stride: cfg.Run.Clients, Keys: lockKeys(cfg), Think: cfg.Think,
			Retry: cfg.Retry, OpTimeout: cfg.OpTimeout, Resource: resourceOf(cfg), FenceSource: cfg.Run.FenceSource,
			Fenced:   cfg.Run.Fenced(),
			Watchdog: cfg.Run.Params[workloads.ParamWatchdog] == "true",
		},
		refused: make(chan struct{}), untilRelease: r.backend.LeasesUntilRelease,
	}
	r.fleet.base.LeasesUntilRelease = r.backend.LeasesUntilRelease
	if r.backend.Client != nil && r.top.links != nil && len(cfg.Addrs) == 0 {
		// A program cannot dial from its slot's address: it is handed
		// relays that do (programlinks.go). They close once the workers
		// are gone (undo runs the last first).
		pl := newProgramLinks(r.top.links)
		r.fleet.programLinks, r.fleet.endpoints = pl, r.top.endpoints()
		r.undo = append(r.undo, pl.close)
	}
	if r.memory != nil {
		r.fleet.base.ResourceAddr = r.memory.Addr()
	} else {
		r.fleet.base.ResourceAddr = r.db.addr
	}
	r.env = nemesis.Env{
		Targets: r.fleet, Record: r.rec.nemesis, Pause: cfg.Pause, Pauses: cfg.Pauses, Lease: cfg.Lease, OpTimeout: cfg.OpTimeout,
		Failpoints: r.backend.Failpoints[cfg.Run.Variant], Patience: cfg.Interval,
	}
	r.env.Settings, _ = nemesis.ParseSettings(cfg.Run.Params) // checked by Preflight; an error leaves the defaults
	if r.top.links != nil {
		r.env.Network = linkNetwork{r.top.links}
	}
	for i := range cfg.Run.Clients {
		if err := r.fleet.spawn(i, history.Process(i)); err != nil {
			r.fleet.stop(time.Second)
			return err
		}
	}
	if r.backend.Client != nil {
		if err := r.fleet.awaitClients(initWait(r.backend)); err != nil {
			r.fleet.stop(time.Second)
			return err
		}
	}
	return nil
}

// drive runs the workload and the nemesis until the time limit,
// Config.Stop, ctx or a failed recording ends them, in segments
// (Config.Segment) with nothing crossing from one into the next. It
// returns the number of the last segment.
func (r *run) drive(ctx context.Context) int {
	cfg := r.cfg
	steps := cfg.Steps
	if steps == nil && cfg.Script == nil {
		steps = nemesis.Plan(cfg.Run.Seed, cfg.Run.Nemesis, cfg.Interval, cfg.Limit)
	}
	start := time.Now()
	r.log.Info("workload started", "clients", cfg.Run.Clients, "limit", cfg.Limit)
	for n, segStart, from := 1, start, time.Duration(0); ; n++ {
		limit := cfg.segmentLimit(n)
		nemCtx, stopNemesis := context.WithCancel(ctx)
		nemDone := make(chan error, 1)
		go func() {
			if cfg.Script != nil {
				nemDone <- nemesis.RunScript(nemCtx, cfg.Script, start, r.env)
				return
			}
			nemDone <- nemesis.Run(nemCtx, nemesis.Window(steps, from, from+limit), segStart, r.env)
		}()
		ending := r.waitLimit(ctx, n, segStart, limit)
		stopNemesis()
		var notRun *nemesis.NotRun
		if err := <-nemDone; errors.As(err, &notRun) {
			r.out.StepsNotRun = notRun.Steps // the scenario reports them
		} else if err != nil {
			r.log.Warn("nemesis", "err", err)
		}
		r.out.Interrupted = ending == endInterrupted
		from += limit
		if ending != endLimit || from >= cfg.Limit {
			return n
		}
		next, resume, err := r.nextSegment(ctx, n)
		if err != nil {
			// The run ends here, as at its time limit: ctx ended (Ctrl-C
			// while the clients were waiting), or the recording failed.
			r.out.Interrupted = true
			return n
		}
		if cfg.SegmentDone != nil {
			cfg.SegmentDone(n, r.out.Dir)
		}
		r.out.Dir, segStart = next, time.Now()
		resume()
	}
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
func (r *run) waitLimit(ctx context.Context, n int, start time.Time, limit time.Duration) ending {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	if r.cfg.Segment <= 0 {
		n = 0
	}
	// Progress counts the segment's grants and faults.
	grants, faults := r.rec.grants.Load(), r.rec.faults.Load()
	for {
		select {
		case <-ctx.Done():
			return endInterrupted
		case <-r.rec.stopped:
			return endInterrupted
		case <-r.fleet.refused:
			return endInterrupted
		case <-timer.C:
			return endLimit
		case <-r.cfg.Stop:
			return endStop
		case <-tick.C:
			if r.cfg.OnProgress != nil {
				r.cfg.OnProgress(Progress{
					Dir: r.rec.currentDir(), Segment: n, Elapsed: time.Since(start), Limit: limit,
					Grants: r.rec.grants.Load() - grants, Faults: r.rec.faults.Load() - faults,
				})
			}
		}
	}
}

// finish ends a run whose workload ended in its segment n: the clients
// stop, the lock keys are inspected (and deleted from a service lockcheck
// did not start), the watcher stops, the history gets the run's end, the
// database's audit table is written out, and the last segment's files are
// closed and handed on. What is left to kill and remove, teardown does.
func (r *run) finish(n int) (Outcome, error) {
	r.fleet.stop(r.cfg.grace())
	r.inspect()
	if len(r.cfg.Addrs) > 0 {
		r.clean()
	}
	r.stopWatching()
	detail := ""
	if r.out.Interrupted {
		detail = history.RunEndInterrupted
	}
	if r.out.RecordingFailed = r.rec.failure(); r.out.RecordingFailed != nil {
		r.out.Interrupted = true
		detail = history.RunEndInterrupted + ": " + r.out.RecordingFailed.Error()
	}
	refusal := r.fleet.refusalError()
	if refusal != nil && r.out.RecordingFailed == nil {
		r.out.Interrupted = true
		detail = history.RunEndInterrupted + ": " + refusal.Error()
	}
	r.rec.nemesis(history.NemRunEnd, history.Value{Detail: detail})
	r.out.Dir = r.rec.currentDir()
	var exportErr error
	if r.db != nil {
		// The database's audit table is the ground truth: written out
		// whatever ctx says, since the workers have stopped.
		exportCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, exportErr = r.db.export(exportCtx, r.cfg.createLog, filepath.Join(r.out.Dir, results.ResourceFile))
		cancel()
	}
	closeErr := r.rec.close()
	if r.memory != nil {
		// The resource log is complete once the resource stops.
		r.memory.Close()
	}
	if r.cfg.SegmentDone != nil {
		r.cfg.SegmentDone(n, r.out.Dir)
	}
	switch {
	case exportErr != nil:
		return r.out, fmt.Errorf("writing the resource log from the database: %w", exportErr)
	case closeErr != nil && r.out.RecordingFailed == nil:
		return r.out, closeErr
	case refusal != nil:
		return r.out, refusal
	}
	return r.out, nil
}

// inspect records the state of every lock key on the service after the
// clients stopped: a key that outlived its holders is evidence.
func (r *run) inspect() {
	lock, err := catalog.Open(r.spec, nil)
	if err != nil {
		return
	}
	defer lock.Close()
	for _, key := range lockKeys(r.cfg) {
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.OpTimeout)
		desc, session, err := backends.Inspect(ctx, lock, key)
		cancel()
		if err != nil {
			desc = key + ": could not inspect: " + err.Error()
		}
		r.rec.nemesis(history.NemInspect, history.Value{Target: key, Detail: desc, Session: session})
	}
}
