package harness

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"github.com/lockcheck/lockcheck/harness/workerproc"
)

// localClient is a client run as a goroutine of this process
// (Config.InProcess). It speaks the worker protocol over pipes, as a worker
// process does over its stdin and stdout, and fakes the signals the nemesis
// sends: a stopped client gets no commands (as a stopped process reads
// none) and stalls at the next failpoint it reaches.
type localClient struct {
	stdin *os.File
	done  chan error

	mu      sync.Mutex
	stopped bool
	queued  []string
}

// startInProcess runs one client of cfg in this process, its errors going
// to logf.
func startInProcess(cfg workerproc.Config, logf *os.File) (*worker, io.Reader, error) {
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	msgR, msgW, err := os.Pipe()
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		return nil, nil, err
	}
	l := &localClient{stdin: cmdW, done: make(chan error, 1)}
	go func() {
		err := workerproc.Run(cfg, cmdR, msgW)
		if err != nil {
			fmt.Fprintln(logf, "lockcheck worker:", err)
		}
		cmdR.Close()
		msgW.Close() // the harness reads to the end, then waits
		l.done <- err
	}()
	return &worker{stdin: cmdW, local: l}, msgR, nil
}

func (l *localClient) send(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		l.queued = append(l.queued, line)
		return
	}
	io.WriteString(l.stdin, line+"\n") //nolint:errcheck // as to a worker that died
}

// signal fakes sig: SIGSTOP holds the client at the next failpoint it
// reaches (at once if it is held at one) and its commands until SIGCONT,
// which hands them over. A goroutine cannot be killed.
func (l *localClient) signal(sig syscall.Signal) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch sig {
	case syscall.SIGSTOP:
		if !l.stopped {
			io.WriteString(l.stdin, workerproc.CmdArm+" "+workerproc.AnyFailpoint+"\n") //nolint:errcheck
			l.stopped = true
		}
	case syscall.SIGCONT:
		if l.stopped {
			l.stopped = false
			io.WriteString(l.stdin, workerproc.CmdDisarm+" "+workerproc.AnyFailpoint+"\n") //nolint:errcheck
			for _, line := range l.queued {
				io.WriteString(l.stdin, line+"\n") //nolint:errcheck
			}
			l.queued = nil
		}
	case syscall.SIGKILL:
		return errors.New("a client running in the test process cannot be killed (run worker processes for kill faults)")
	}
	return nil
}
