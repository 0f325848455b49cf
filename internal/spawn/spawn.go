// Package spawn starts child processes that the kernel kills when the
// process that started them dies (the parent-death signal), for the
// harness's nodes and workers and for a worker's lock client program.
package spawn

import (
	"os/exec"
	"runtime"
	"syscall"
)

// The parent-death signal fires when the thread that forked the child
// exits, not the process. Go may retire idle threads, so every child is
// forked from one goroutine locked to a thread that never exits.
var requests = make(chan request)

type request struct {
	cmd  *exec.Cmd
	done chan error
}

func init() {
	go func() {
		runtime.LockOSThread()
		for req := range requests {
			req.done <- req.cmd.Start()
		}
	}()
}

// Start starts cmd so that it gets SIGKILL when this process dies. With
// ownGroup it leads a process group of its own (a node or a worker, which
// the harness stops and kills as a group); without, it stays in this
// process's group, so that a signal to the group reaches it too (a lock
// client program, stopped and killed with its worker).
func Start(cmd *exec.Cmd, ownGroup bool) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: ownGroup, Pdeathsig: syscall.SIGKILL}
	done := make(chan error, 1)
	requests <- request{cmd, done}
	return <-done
}
