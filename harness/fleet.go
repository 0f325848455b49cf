package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/harness/workerproc"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/nemesis"
	"github.com/lockcheck/lockcheck/results"
)

// fleet keeps the run's clients going and is what the nemesis aims at
// (nemesis.Targets). It runs one worker per slot, replaces one that dies
// by a new process, parks them all before their next acquire and lets
// them go again at a soak's boundaries (hold), and stops them at the end;
// it knows which of them holds a lock now, and hands faults the nodes and
// the service handle. What the workers report, the recorder writes.
type fleet struct {
	cfg   Config
	procs *procs
	// rec records every event of the workers.
	rec   *recorder
	nodes []server
	// service is the backend's service-level handle for the nemesis, if any.
	service any
	log     *slog.Logger
	// logDir holds the workers' logs (logs/): the run directory, or
	// Config.LogDir.
	logDir string
	base   workerproc.Config
	// links, if set, gives each client the source address of its own
	// links.
	links links
	// programLinks, if set, hands each slot's lock client program
	// addresses that lead over the slot's links to endpoints, the nodes.
	programLinks *programLinks
	endpoints    []backends.Endpoint

	mu sync.Mutex
	// holding is set while the clients wait at a segment boundary: a
	// worker started then starts parked.
	holding  bool
	slots    []*worker
	stopping bool
	running  sync.WaitGroup
	// refused is closed when the lock broke a rule the run cannot go on
	// without (refusal.go); refusal says which. untilRelease is the
	// backend's LeasesUntilRelease.
	refused      chan struct{}
	refusal      *Refused
	untilRelease bool
}

// spawn starts the worker of slot as process.
func (f *fleet) spawn(slot int, process history.Process) error {
	wc := f.base
	wc.Process = int(process)
	var err error
	if wc.Lock, err = f.clientSpec(wc.Lock, slot, process); err != nil {
		return err
	}
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
	w.ready, w.gone = make(chan struct{}), make(chan struct{})
	f.mu.Lock()
	for len(f.slots) <= slot {
		f.slots = append(f.slots, nil)
	}
	f.slots[slot] = w
	// A worker that died just as stop began is replaced after stop took
	// its list: the replacement, which has nothing to finish, is killed
	// here, under the same lock stop sets stopping with, so none escapes
	// both and stop never waits for a worker it did not reach.
	stopping := f.stopping
	f.running.Add(1)
	f.mu.Unlock()
	if stopping {
		w.send(workerproc.CmdStop) // a client in this process cannot be killed
		w.stdin.Close()
		w.Signal(syscall.SIGKILL) //nolint:errcheck // gone already is fine
	}
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
		f.rec.append(*e)
		if e.Type == history.OK && e.F == history.FAcquire {
			f.checkLease(e)
		}
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
		f.rec.append(*e)
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
	f.rec.nemesis(history.NemStart, history.Value{Target: next.String(), PID: f.slot(w.slot).pid})
}

// slot is the worker of slot i now.
func (f *fleet) slot(i int) *worker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.slots[i]
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
		// The workers now, not the list above: one may have been replaced
		// since.
		f.mu.Lock()
		workers = append(workers[:0], f.slots...)
		f.mu.Unlock()
		for _, w := range workers {
			if w != nil {
				w.Signal(syscall.SIGKILL) //nolint:errcheck // gone already is fine
			}
		}
		<-done
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

// LastFailover implements nemesis.Failovers.
func (f *fleet) LastFailover() int64 { return f.rec.failover.Load() }

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

// Holders implements nemesis.HolderLister: every client that holds a lock
// right now, so a fault can wait for a second holder while it holds the
// first (Kleppmann's Redlock case).
func (f *fleet) Holders() []nemesis.Client {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []nemesis.Client
	for _, w := range f.slots {
		if w != nil && w.holds() {
			out = append(out, w)
		}
	}
	return out
}

// Refusals implements nemesis.RefusalCounter: how many acquires the service
// refused to write at all so far.
func (f *fleet) Refusals() int64 { return f.rec.refusals.Load() }
