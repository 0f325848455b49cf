package harness

import (
	"errors"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/lockcheck/lockcheck/internal/procstate"
	"github.com/lockcheck/lockcheck/internal/spawn"
)

// procs owns every child process of a run. Each child runs in its own
// process group and gets SIGKILL from the kernel when lockcheck dies
// (parent-death signal, package spawn), so none outlives the run even
// after a crash.
type procs struct {
	mu       sync.Mutex
	children map[int]*exec.Cmd
	exited   map[int]chan struct{}
}

func newProcs() *procs {
	return &procs{children: map[int]*exec.Cmd{}, exited: map[int]chan struct{}{}}
}

// start starts cmd as a child of the run. The caller must call wait (or rely
// on killAll) to reap it.
func (p *procs) start(cmd *exec.Cmd) error {
	if err := spawn.Start(cmd, true); err != nil {
		return err
	}
	p.mu.Lock()
	p.children[cmd.Process.Pid] = cmd
	p.exited[cmd.Process.Pid] = make(chan struct{})
	p.mu.Unlock()
	return nil
}

// wait reaps cmd and forgets it.
func (p *procs) wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	p.mu.Lock()
	if ch, ok := p.exited[cmd.Process.Pid]; ok {
		close(ch)
		delete(p.exited, cmd.Process.Pid)
	}
	delete(p.children, cmd.Process.Pid)
	p.mu.Unlock()
	return err
}

// signalGroup sends sig to the child's whole process group, and to its
// descendants that left the group (a PostgreSQL server's backends each
// lead a session of their own). They are listed before the group is
// signalled, since a killed parent's children are handed to init; a
// SIGSTOP lists them again once the parent is stopped and can fork no
// more. A SIGSTOP returns only once every thread of them has stopped (see
// procstate.WaitStopped).
func signalGroup(pid int, sig syscall.Signal) error {
	tree := procstate.Descendants(pid)
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	if sig == syscall.SIGSTOP {
		tree = procstate.Descendants(pid)
	}
	for _, d := range tree {
		if pgid, _ := syscall.Getpgid(d); pgid != pid {
			syscall.Kill(d, sig) //nolint:errcheck // it may have exited meanwhile
		}
	}
	if err == nil && sig == syscall.SIGSTOP {
		for _, d := range tree {
			if werr := procstate.WaitStopped(d, 5*time.Second); werr != nil {
				return werr
			}
		}
		return procstate.WaitStopped(pid, 5*time.Second)
	}
	return err
}

// killAll continues every stopped child (a stopped process would otherwise
// keep its group alive until it runs again) and kills it, then waits up to
// timeout for the waiters to reap them.
func (p *procs) killAll(timeout time.Duration) {
	p.mu.Lock()
	var waits []chan struct{}
	for pid := range p.children {
		signalGroup(pid, syscall.SIGCONT) //nolint:errcheck // best effort before the kill
		signalGroup(pid, syscall.SIGKILL) //nolint:errcheck // gone already is fine
		waits = append(waits, p.exited[pid])
	}
	p.mu.Unlock()
	deadline := time.After(timeout)
	for _, ch := range waits {
		select {
		case <-ch:
		case <-deadline:
			return
		}
	}
}
