// Package workerproc is one client process of a run: lockcheck started again
// by the harness as "lockcheck worker", it opens the backend's lock client
// from the catalog, runs the workload's client loop, writes every event to
// the harness on stdout and parks at the failpoints the harness arms over
// stdin. It lives under harness/ because it links every backend (through
// the catalog), which the workloads themselves do not.
package workerproc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads"
	"github.com/lockcheck/lockcheck/workloads/pgresource"
	"github.com/lockcheck/lockcheck/workloads/resource"
)

// Config is what the harness hands a worker process.
type Config struct {
	Lock         catalog.Spec  `json:"lock"`
	Process      int           `json:"process"`
	Stride       int           `json:"stride"`
	Keys         []string      `json:"keys"`
	Think        string        `json:"think"`
	Retry        time.Duration `json:"retry"`
	OpTimeout    time.Duration `json:"op_timeout"`
	Seed         uint64        `json:"seed"`
	ResourceAddr string        `json:"resource_addr"`
	// Resource is which resource ResourceAddr serves: memory (lockcheck's
	// store over HTTP) or postgres (a database node).
	Resource string `json:"resource,omitempty"`
	// Fenced makes a database resource's writes conditional on the fence.
	Fenced   bool `json:"fenced,omitempty"`
	Watchdog bool `json:"watchdog,omitempty"`
	// Held starts the client parked before its first acquire, as if
	// armed at it: the harness started it while the other clients wait at
	// a segment boundary.
	Held bool `json:"held,omitempty"`
	// FenceSource is where fences come from (workloads.FenceFromLock, ...).
	FenceSource string `json:"fence_source,omitempty"`
	// LeasesUntilRelease says the lock holds a grant with no TTL until it
	// is released (catalog.Backend.LeasesUntilRelease).
	LeasesUntilRelease bool `json:"leases_until_release,omitempty"`
}

// Message is one line a worker writes to the harness: an event of its
// client, or word that it is parked at an armed failpoint.
type Message struct {
	Event     *history.Event  `json:"e,omitempty"`
	Failpoint string          `json:"fp,omitempty"`
	Process   history.Process `json:"p"`
	// Ready says the worker opened its lock client (a lock client
	// program answered init); Failed that it could not, and why.
	Ready  bool   `json:"ready,omitempty"`
	Failed string `json:"failed,omitempty"`
}

// Commands the harness writes to a worker, one per line.
const (
	CmdArm    = "arm"    // arm NAME: park at the failpoint NAME the next time it is reached
	CmdDisarm = "disarm" // disarm NAME
	CmdGo     = "go"     // leave the failpoint the worker is parked at
	CmdStop   = "stop"   // finish the cycle in progress, release, and exit
)

// AnyFailpoint armed parks the client at whichever failpoint it reaches
// next: the stall that stands in for a SIGSTOP of a client that runs in the
// harness's own process.
const AnyFailpoint = "*"

// Run runs one client in this process, writing messages to out and reading
// commands from in, until it is told to stop or in is closed.
func Run(cfg Config, in io.Reader, out io.Writer) error {
	think, err := workloads.ParseDistribution(cfg.Think)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	msgs := &messageWriter{w: bufio.NewWriter(out)}
	fps := &failpoints{armed: map[string]bool{}, resume: make(chan struct{}, 1), done: ctx.Done()}
	var client *workloads.Client
	fps.announce = func(name string) { msgs.write(Message{Failpoint: name, Process: client.Process()}) }

	if cfg.Lock.Program != nil {
		cfg.Lock.Program.Warn = func(line string) { fmt.Fprintln(os.Stderr, "lockcheck worker:", line) }
	}
	lock, err := catalog.Open(cfg.Lock, fps.hit)
	if err != nil {
		msgs.write(Message{Failed: err.Error(), Process: history.Process(cfg.Process)})
		return err
	}
	defer lock.Close()
	msgs.write(Message{Ready: true, Process: history.Process(cfg.Process)})
	var res resource.Resource = resource.NewClient(cfg.ResourceAddr, cfg.OpTimeout)
	if cfg.Resource == pgresource.Name {
		db := pgresource.Open(cfg.ResourceAddr, cfg.OpTimeout, cfg.Fenced)
		defer db.Close()
		if tl, ok := lock.(pgresource.TxLock); ok {
			db.InLockTx(tl)
		}
		res = db
	}
	client = workloads.NewClient(workloads.Config{
		Process: cfg.Process, Stride: cfg.Stride, Keys: cfg.Keys, Think: think,
		Retry: cfg.Retry, OpTimeout: cfg.OpTimeout, Seed: cfg.Seed, Watchdog: cfg.Watchdog, LeasesUntilRelease: cfg.LeasesUntilRelease,
		FenceFromResource: cfg.FenceSource == workloads.FenceFromResource,
	}, lock, res, func(e history.Event) { msgs.write(Message{Event: &e, Process: e.Process}) }, fps.hit)

	go func() {
		// Whatever ends the command stream, the harness is done with us.
		defer cancel()
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			verb, arg, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
			switch verb {
			case CmdArm:
				fps.arm(arg, true)
			case CmdDisarm:
				fps.arm(arg, false)
			case CmdGo:
				fps.release()
			case CmdStop:
				return
			}
		}
	}()
	if cfg.Held {
		fps.arm(workloads.FailpointBeforeAcquire, true)
	}
	client.Run(ctx)
	return msgs.err
}

type messageWriter struct {
	mu  sync.Mutex
	w   *bufio.Writer
	err error
}

// write sends one message and flushes it at once: the harness tracks who
// holds the lock from this stream, and a pause aimed at the holder must not
// wait on a buffer.
func (m *messageWriter) write(msg Message) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return
	}
	b, err := json.Marshal(msg)
	if err == nil {
		b = append(b, '\n')
		_, err = m.w.Write(b)
	}
	if err == nil {
		err = m.w.Flush()
	}
	if err != nil {
		m.err = fmt.Errorf("writing to the harness: %w", err)
	}
}

// failpoints parks the client at an armed failpoint until the harness says
// go, so a fault lands at that exact moment of the client's code.
type failpoints struct {
	mu       sync.Mutex
	armed    map[string]bool
	resume   chan struct{}
	done     <-chan struct{}
	announce func(name string)
}

func (f *failpoints) arm(name string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on {
		f.armed[name] = true
	} else {
		delete(f.armed, name)
	}
}

func (f *failpoints) release() {
	select {
	case f.resume <- struct{}{}:
	default:
	}
}

func (f *failpoints) hit(name string) {
	f.mu.Lock()
	armed := f.armed[name] || f.armed[AnyFailpoint]
	delete(f.armed, name)
	delete(f.armed, AnyFailpoint)
	f.mu.Unlock()
	if !armed {
		return
	}
	f.announce(name)
	select {
	case <-f.resume:
	case <-f.done:
	}
}
