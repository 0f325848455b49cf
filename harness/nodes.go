package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockcheck/lockcheck/backends"
)

// node is a running server process of the lock service.
type node struct {
	spec backends.NodeSpec
	name string
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

func (n *node) Name() string { return n.name }
func (n *node) PID() int     { return n.cmd.Process.Pid }

func (n *node) Signal(sig syscall.Signal) error { return signalGroup(n.PID(), sig) }

// startNode starts a node on a free loopback port with its own directory
// under root and waits until it serves requests.
func startNode(ctx context.Context, p *procs, spec backends.NodeSpec, root string) (*node, error) {
	dir := filepath.Join(root, spec.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	// A port found free can be taken by someone else before the server binds
	// it; try a few.
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		n, err := launch(ctx, p, spec, dir, port)
		if err == nil {
			return n, nil
		}
		lastErr = err
		if !errors.Is(err, errPortInUse) {
			break
		}
	}
	return nil, lastErr
}

var errPortInUse = errors.New("port in use")

func launch(ctx context.Context, p *procs, spec backends.NodeSpec, dir string, port int) (*node, error) {
	cmd := exec.Command(spec.Program, spec.Args(port, dir)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	if err := p.start(cmd); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", spec.Name, spec.Program, err)
	}
	n := &node{spec: spec, name: spec.Name, addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.wait(cmd) //nolint:errcheck // the exit is seen through done
		close(n.done)
	}()
	readyCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		select {
		case <-n.done:
			out := strings.TrimSpace(stderr.String() + "\n" + logTail(dir))
			if strings.Contains(out, "Address already in use") {
				return nil, fmt.Errorf("%s: 127.0.0.1:%d: %w", spec.Name, port, errPortInUse)
			}
			return nil, fmt.Errorf("%s exited before it was ready: %s", spec.Name, lastLine(out))
		case <-readyCtx.Done():
			n.Signal(syscall.SIGKILL) //nolint:errcheck // giving up on it
			return nil, fmt.Errorf("%s did not answer on %s within 10s (see %s)", spec.Name, n.addr, dir)
		case <-time.After(20 * time.Millisecond):
		}
		if spec.Ready(readyCtx, n.addr) == nil {
			return n, nil
		}
	}
}

// stop kills the node and waits for it to exit.
func (n *node) stop() {
	n.Signal(syscall.SIGCONT) //nolint:errcheck // it may be stopped by a fault
	n.Signal(syscall.SIGKILL) //nolint:errcheck // gone already is fine
	select {
	case <-n.done:
	case <-time.After(5 * time.Second):
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func logTail(dir string) string {
	matches, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var b strings.Builder
	for _, m := range matches {
		data, err := os.ReadFile(m)
		if err == nil {
			b.Write(data)
		}
	}
	return b.String()
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	if s == "" {
		return "no output"
	}
	return s
}
