package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/lockcheck/lockcheck/harness/workerproc"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/nemesis"
	"github.com/lockcheck/lockcheck/workloads"
)

// WorkerEnv carries a worker's configuration from the harness to the worker
// process, which is lockcheck itself started as `lockcheck worker`.
const WorkerEnv = "LOCKCHECK_WORKER"

// RunWorkerFromEnv runs this process as a worker if WorkerEnv is set. It
// reports whether it did; a worker's error ends the process with status 3.
func RunWorkerFromEnv() bool {
	raw := os.Getenv(WorkerEnv)
	if raw == "" {
		return false
	}
	var cfg workerproc.Config
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "lockcheck worker: bad configuration:", err)
		os.Exit(3)
	}
	if err := workerproc.Run(cfg, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "lockcheck worker:", err)
		os.Exit(3)
	}
	return true
}

// worker is the harness's handle on one worker process. It follows the
// worker's events to know whether it holds a lock and which operation is
// pending, and relays failpoint parking between the nemesis and the worker.
type worker struct {
	slot  int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	pid   int
	// local is set for a client that runs in this process (Config.InProcess)
	// instead of cmd.
	local *localClient

	mu      sync.Mutex
	process history.Process
	holding map[string]bool
	// session is the server session of the client's current grant, for
	// kill-session.
	session string
	pending *history.Event // the invoke awaiting its completion
	waiter  *parkWaiter
	// keepParked is set for a worker started while the fleet holds its
	// clients at a segment boundary (workerproc.Config.Held): it parks
	// before its first acquire whether or not a waiter is there yet, and
	// parkedAt then names the failpoint it waits at.
	keepParked bool
	parkedAt   string
	exited     bool
	// grantInvoke and grantOK time the latest grant on the history's clock;
	// grantNodes are the nodes that granted it (a multi-node lock's).
	grantInvoke, grantOK int64
	grantNodes           []string
	// lease is the lease the latest grant reported (its ttl_ms), renewed
	// by its extends: a library may take another than the run asked.
	lease time.Duration
	// emptyRelease is when the latest release that deleted nothing
	// completed, on the history's clock.
	emptyRelease int64
	// ready is closed once the worker opened its lock client, gone once
	// it exited; failed says why it could not open it.
	ready, gone chan struct{}
	failed      string
}

// failure is why the worker could not open its lock client, if it said.
func (w *worker) failure() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// EmptyRelease implements nemesis.EmptyReleases.
func (w *worker) EmptyRelease() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.emptyRelease
}

// GrantNodes implements nemesis.GrantNodes: the nodes that granted the
// latest grant, for a multi-node lock (Redlock, redsync); none otherwise.
func (w *worker) GrantNodes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.grantNodes
}

// Grant implements nemesis.GrantTimes: when the latest grant was asked for
// and given.
func (w *worker) Grant() (invoke, ok int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.grantInvoke, w.grantOK
}

// GrantedLease implements nemesis.LeaseGranted: the lease of the latest
// grant as the lock reported it, renewed by its extends; 0 if it said none.
func (w *worker) GrantedLease() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lease
}

type parkWaiter struct {
	failpoint string
	parked    chan struct{}
	missed    chan struct{}
}

func (w *worker) Name() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.process.String()
}

func (w *worker) PID() int { return w.pid }

func (w *worker) Signal(sig syscall.Signal) error {
	if w.local != nil {
		return w.local.signal(sig)
	}
	return signalGroup(w.pid, sig)
}

func (w *worker) send(line string) {
	if w.local != nil {
		w.local.send(line)
		return
	}
	// A worker that died cannot read; the harness learns of its death from
	// its output ending.
	io.WriteString(w.stdin, line+"\n") //nolint:errcheck
}

// wait waits until the worker has exited.
func (w *worker) wait(p *procs) error {
	if w.local != nil {
		return <-w.local.done
	}
	return p.wait(w.cmd)
}

func (w *worker) holds() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.exited && len(w.holding) > 0
}

// Session implements nemesis.SessionHolder: the server session of the
// client's latest grant.
func (w *worker) Session() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.session
}

// ParkAt implements nemesis.Client.
func (w *worker) ParkAt(ctx context.Context, failpoint string) (func(), error) {
	pw := &parkWaiter{failpoint: failpoint, parked: make(chan struct{}, 1), missed: make(chan struct{}, 1)}
	w.mu.Lock()
	if w.exited {
		w.mu.Unlock()
		return nil, nemesis.ErrMissed
	}
	if w.parkedAt == failpoint {
		// Started parked, and waiting there already.
		w.parkedAt = ""
		w.mu.Unlock()
		return func() { w.send(workerproc.CmdGo) }, nil
	}
	w.waiter = pw
	w.mu.Unlock()
	w.send(workerproc.CmdArm + " " + failpoint)
	forget := func() {
		w.mu.Lock()
		if w.waiter == pw {
			w.waiter = nil
		}
		w.mu.Unlock()
	}
	select {
	case <-pw.parked:
		return func() { w.send(workerproc.CmdGo) }, nil
	case <-pw.missed:
		w.send(workerproc.CmdDisarm + " " + failpoint)
		return nil, nemesis.ErrMissed
	case <-ctx.Done():
		forget()
		// If the worker parks from now on, observe lets it go on. If it
		// parked just as we gave up, nobody else will.
		select {
		case <-pw.parked:
			w.send(workerproc.CmdGo)
		default:
		}
		w.send(workerproc.CmdDisarm + " " + failpoint)
		return nil, ctx.Err()
	}
}

// letGo lets a worker that started parked go on, if it still waits.
func (w *worker) letGo() {
	w.mu.Lock()
	parked := w.parkedAt != ""
	w.keepParked, w.parkedAt = false, ""
	w.mu.Unlock()
	if parked {
		w.send(workerproc.CmdGo)
	}
}

// observe updates the handle from one message of the worker. It returns
// the event to record, if the message carried one.
func (w *worker) observe(m workerproc.Message) *history.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case m.Ready:
		close(w.ready)
		return nil
	case m.Failed != "":
		w.failed = m.Failed
		return nil
	}
	if m.Failpoint != "" {
		switch {
		case w.waiter != nil && w.waiter.failpoint == m.Failpoint:
			w.waiter.parked <- struct{}{}
			w.waiter = nil
		case w.keepParked && m.Failpoint == workloads.FailpointBeforeAcquire:
			w.keepParked, w.parkedAt = false, m.Failpoint // for hold, or letGo
		default:
			w.send(workerproc.CmdGo) // nobody aims at it any more
		}
		return nil
	}
	e := m.Event
	if e == nil {
		return nil
	}
	if e.Process == history.Nemesis {
		return e // an observation of the client's library (lock-lost): no operation of it
	}
	w.process = e.Process
	switch {
	case e.Type == history.Invoke:
		w.pending = e
		if e.F == history.FRelease {
			delete(w.holding, e.Key)
			w.missHeldWaiter()
		}
	case e.Type == history.OK && e.F == history.FAcquire:
		if w.pending != nil {
			w.grantInvoke, w.grantOK = w.pending.Time, e.Time
			w.grantNodes = nil
			if e.Value != nil {
				w.grantNodes = e.Value.Nodes
			}
		}
		w.pending = nil
		w.holding[e.Key] = true
		w.lease = 0
		if e.Value != nil {
			w.session = e.Value.Session
			w.lease = time.Duration(e.Value.TTLms) * time.Millisecond
		}
	case e.Type == history.OK && e.F == history.FExtend:
		w.pending = nil
		if v := e.Value; v != nil && v.Accepted != nil && *v.Accepted && v.TTLms > 0 {
			w.lease = time.Duration(v.TTLms) * time.Millisecond
		}
	case e.Type == history.OK && e.F == history.FRelease:
		w.pending = nil
		if e.Value != nil && e.Value.Accepted != nil && !*e.Value.Accepted {
			w.emptyRelease = e.Time
		}
	case e.Type == history.Info:
		// The process is retired: it no longer acts on anything it held.
		w.pending = nil
		clear(w.holding)
		w.missHeldWaiter()
	default:
		w.pending = nil
	}
	return e
}

// missHeldWaiter tells a waiter that the client left its hold without
// reaching the failpoint, if the failpoint lies inside the hold (the
// workload's lease check and write). Every other one is still ahead of a
// client that lets its lock go: before its next acquire, or inside the
// lock's own acquire or release (a backend's failpoint, such as one between
// a release's GET and its DEL, which the release's invoke precedes).
func (w *worker) missHeldWaiter() {
	if w.waiter != nil && (w.waiter.failpoint == workloads.FailpointBeforeWrite || w.waiter.failpoint == workloads.FailpointBeforeLeaseCheck) {
		w.missWaiter()
	}
}

func (w *worker) missWaiter() {
	if w.waiter != nil {
		w.waiter.missed <- struct{}{}
		w.waiter = nil
	}
}

// died marks the worker gone and returns the completion its pending
// operation never got: the operation may or may not have happened.
func (w *worker) died(reason string) *history.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.exited = true
	close(w.gone)
	clear(w.holding)
	w.missWaiter()
	if w.pending == nil {
		return nil
	}
	e := &history.Event{Time: history.Now(), Process: w.pending.Process, Type: history.Info, F: w.pending.F, Key: w.pending.Key, Error: reason}
	w.pending = nil
	return e
}

// nextProcess is the process number a replacement worker starts with.
func (w *worker) nextProcess(stride int) history.Process {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.process + history.Process(stride)
}

// readMessages feeds every message of the worker to handle until its output
// ends.
func readMessages(r io.Reader, handle func(workerproc.Message)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var m workerproc.Message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return fmt.Errorf("bad message from worker: %w", err)
		}
		handle(m)
	}
	return sc.Err()
}
