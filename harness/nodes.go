package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/harness/faketime"
	"github.com/lockcheck/lockcheck/harness/netproxy"
)

// node is a server process of the lock service. It can be stopped,
// killed, restarted on the same ports, and, when started under
// libfaketime, have its wall clock moved.
type node struct {
	spec  backends.NodeSpec
	ep    backends.Endpoint
	all   []backends.Endpoint
	procs *procs
	*faketime.WallClock

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when the current process has exited
	output *bytes.Buffer
}

func (n *node) Name() string { return n.ep.Name }

func (n *node) addr() string { return n.ep.Addr() }

func (n *node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd.Process.Pid
}

func (n *node) Signal(sig syscall.Signal) error { return signalGroup(n.PID(), sig) }

// Endpoint is where the node listens.
func (n *node) Endpoint() backends.Endpoint { return n.ep }

// allocate picks free loopback ports and directories for every node of a
// topology, so each node's command line can name the others.
func allocate(specs []backends.NodeSpec, root string) ([]backends.Endpoint, error) {
	// A node runs in its directory and is told where it is (redis-server's
	// --dir): a relative path would be resolved twice.
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	eps := make([]backends.Endpoint, len(specs))
	for i, s := range specs {
		ports := max(s.Ports, 1)
		eps[i] = backends.Endpoint{Name: s.Name, Host: backends.Loopback, Bind: backends.Loopback, Dir: filepath.Join(root, s.Name)}
		for j := 0; j < ports; j++ {
			p, err := freePort()
			if err != nil {
				return nil, err
			}
			eps[i].Ports = append(eps[i].Ports, p)
		}
		if err := os.MkdirAll(eps[i].Dir, 0o755); err != nil {
			return nil, err
		}
	}
	return eps, nil
}

// startTopology starts every node and waits until each serves requests.
// A port taken by someone else between allocation and start is retried on
// fresh ports.
func startTopology(ctx context.Context, p *procs, specs []backends.NodeSpec, root string) ([]*node, error) {
	nodes, _, err := startNodes(ctx, p, specs, root, false)
	return nodes, err
}

// startNodes is startTopology, and with proxied set every node is reached
// through a proxy of the returned network (proxyNodes); the caller closes
// it after the nodes.
func startNodes(ctx context.Context, p *procs, specs []backends.NodeSpec, root string, proxied bool) ([]*node, *netproxy.Network, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		eps, err := allocate(specs, root)
		if err != nil {
			return nil, nil, err
		}
		var network *netproxy.Network
		if proxied {
			network = netproxy.New()
			if lastErr = proxyNodes(network, specs, eps); lastErr != nil {
				network.Close()
				continue
			}
		}
		nodes := make([]*node, len(specs))
		for i := range specs {
			nodes[i] = &node{spec: specs[i], ep: eps[i], all: eps, procs: p, WallClock: faketime.NewWallClock(specs[i].Name, eps[i].Dir, specs[i].FakeClock)}
		}
		lastErr = nil
		for _, n := range nodes {
			if err := n.start(ctx); err != nil {
				lastErr = err
				break
			}
		}
		if lastErr == nil {
			return nodes, network, nil
		}
		for _, n := range nodes {
			n.Stop()
		}
		if network != nil {
			network.Close()
		}
		if !errors.Is(lastErr, errPortInUse) {
			break
		}
	}
	return nil, nil, lastErr
}

var errPortInUse = errors.New("port in use")

// start launches the node's process and waits until it is ready.
func (n *node) start(ctx context.Context) error {
	cmd := exec.Command(n.spec.Program, n.spec.Args(n.ep, n.all)...)
	cmd.Dir = n.ep.Dir
	cmd.Env = append(os.Environ(), n.spec.Env...)
	if n.spec.FakeClock {
		for _, lib := range faketime.Libs {
			if _, err := os.Stat(lib); err != nil {
				return fmt.Errorf("%s needs %s for clock faults: %s", n.Name(), lib, faketime.InstallFix)
			}
		}
		if err := n.WriteClockFile(); err != nil {
			return err
		}
		cmd.Env = append(cmd.Env, faketime.Env(n.ClockFile())...)
	}
	out := &bytes.Buffer{}
	cmd.Stdout = out
	cmd.Stderr = out
	if err := n.procs.start(cmd); err != nil {
		return fmt.Errorf("starting %s (%s): %w", n.Name(), n.spec.Program, err)
	}
	done := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.done, n.output = cmd, done, out
	n.mu.Unlock()
	go func() {
		n.procs.wait(cmd) //nolint:errcheck // the exit is seen through done
		close(done)
	}()

	within := n.spec.ReadyWithin
	if within <= 0 {
		within = 15 * time.Second
	}
	readyCtx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		select {
		case <-done:
			text := strings.TrimSpace(out.String() + "\n" + logTail(n.ep.Dir))
			if strings.Contains(text, "Address already in use") || strings.Contains(text, "address already in use") {
				return fmt.Errorf("%s: %v: %w", n.Name(), n.ep.Ports, errPortInUse)
			}
			return fmt.Errorf("%s exited before it was ready: %s", n.Name(), lastLine(text))
		case <-readyCtx.Done():
			n.Signal(syscall.SIGKILL) //nolint:errcheck // giving up on it
			if ctx.Err() != nil {
				return &StartInterrupted{What: n.Name()}
			}
			return fmt.Errorf("%s did not answer on %s within %s (see %s)", n.Name(), n.addr(), within, n.ep.Dir)
		case <-time.After(20 * time.Millisecond):
		}
		if n.spec.Ready(readyCtx, n.addr()) == nil {
			return nil
		}
	}
}

// Stop kills the node and waits for it to exit.
func (n *node) Stop() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	signalGroup(cmd.Process.Pid, syscall.SIGCONT) //nolint:errcheck // it may be stopped by a fault
	signalGroup(cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // gone already is fine
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// Restart kills the node if it runs and starts it again on the same ports,
// first removing its data when wipe is set.
func (n *node) Restart(ctx context.Context, wipe bool) error {
	n.Stop()
	if wipe {
		for _, p := range n.spec.DataPaths {
			if err := os.RemoveAll(filepath.Join(n.ep.Dir, p)); err != nil {
				return err
			}
		}
	}
	return n.start(ctx)
}

// resetClocks puts every faked clock back to the real time.
func resetClocks[S server](nodes []S) {
	for _, n := range nodes {
		if n.Clock() != 0 {
			n.SetClock(0) //nolint:errcheck // the process is about to be killed anyway
		}
	}
}

// Ports are picked below the kernel's ephemeral range (32768 and up on
// Linux): a port the kernel hands out for bind(0) is free only until some
// outgoing connection (a client, a worker, an etcd peer dialing out) takes
// it, which happened between picking an etcd member's port and starting it.
// Ports handed out once are not handed out again by this process, so runs in
// parallel (tests) never share one.
const (
	portLow  = 20000
	portHigh = 32000
)

var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{}
)

func freePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for try := 0; try < 1000; try++ {
		port := portLow + rand.IntN(portHigh-portLow)
		if portsUsed[port] {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // someone has it
		}
		ln.Close()
		portsUsed[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port between %d and %d", portLow, portHigh)
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
