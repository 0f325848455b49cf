package container

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/harness/faketime"
	"github.com/lockcheck/lockcheck/internal/procstate"
)

// Node is a server of the lock service running as PID 1 of its own
// container, so that a signal sent to the container reaches the server
// itself. Its node directory is mounted at the same path inside, so its
// configuration, data, log and clock file are where a local process would
// keep them.
type Node struct {
	rt    *Runtime
	spec  backends.NodeSpec
	ep    backends.Endpoint
	image string
	c     testcontainers.Container
	*faketime.WallClock

	mu  sync.Mutex
	pid int  // the server's PID on the host
	cut bool // disconnected from the run's network

	shape shaping // its slow and flaky links
}

// StartTopology creates and starts a container for every node and waits
// until each serves requests.
func (r *Runtime) StartTopology(ctx context.Context, specs []backends.NodeSpec, root string) ([]*Node, error) {
	eps, err := r.allocate(specs, root)
	if err != nil {
		return nil, err
	}
	nodes := make([]*Node, len(specs))
	for i, s := range specs {
		image, err := r.image(s.Image)
		if err != nil {
			return nil, err
		}
		nodes[i] = &Node{rt: r, spec: s, ep: eps[i], image: image, WallClock: faketime.NewWallClock(s.Name, eps[i].Dir, s.FakeClock)}
	}
	// The engine takes a few hundred milliseconds per container: create and
	// start them all at once. Every node's command line already names the
	// others, and each waits for its peers as it would after a restart.
	if err := eachNode(nodes, func(n *Node) error { return n.create(ctx, eps) }); err != nil {
		return nil, err
	}
	if err := eachNode(nodes, func(n *Node) error { return n.start(ctx) }); err != nil {
		return nil, err
	}
	return nodes, nil
}

// eachNode runs f for every node in parallel and returns the first error.
func eachNode(nodes []*Node, f func(*Node) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Name is the node's name in the topology.
func (n *Node) Name() string { return n.ep.Name }

// Endpoint is where the node listens.
func (n *Node) Endpoint() backends.Endpoint { return n.ep }

// Image is the image the node runs in.
func (n *Node) Image() string { return n.image }

// PID is the server's process on the host.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pid
}

// create makes the container without starting it, so that the image can be
// checked for what the node needs first.
func (n *Node) create(ctx context.Context, all []backends.Endpoint) error {
	env := map[string]string{}
	for _, kv := range n.spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if n.spec.FakeClock {
		if err := n.WriteClockFile(); err != nil {
			return err
		}
		for _, kv := range faketime.Env(n.ClockFile()) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	ip, err := n.address()
	if err != nil {
		return err
	}
	netName := n.rt.net.Name
	user := fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	req := testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:      n.image,
			Name:       "lockcheck-" + n.rt.run + "-" + n.ep.Name,
			Entrypoint: []string{n.spec.Command},
			Cmd:        n.spec.Args(n.ep, all),
			Env:        env,
			// testcontainers adds its own labels to the map it is given.
			Labels:   maps.Clone(n.rt.labels),
			Networks: []string{netName},
			ConfigModifier: func(c *container.Config) {
				c.User = user
				c.WorkingDir = n.ep.Dir
			},
			HostConfigModifier: func(h *container.HostConfig) {
				h.Binds = []string{n.ep.Dir + ":" + n.ep.Dir}
				// No init process: the server must be PID 1 for a signal to
				// the container to stop or kill the server itself.
				h.Init = new(bool)
			},
			EndpointSettingsModifier: func(m map[string]*network.EndpointSettings) {
				m[netName] = &network.EndpointSettings{IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: ip}}
			},
		},
		Started: false,
	}
	// Creation is not cut off by Ctrl-C: a request the engine already
	// took would leave a container no node holds. It takes well under a
	// second; the caller sees the interruption right after.
	createCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	c, err := testcontainers.GenericContainer(createCtx, req)
	if c != nil {
		n.c = c
		n.rt.mu.Lock()
		n.rt.nodes = append(n.rt.nodes, n)
		n.rt.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("creating the container of %s from %s: %v", n.Name(), n.image, oneLine(err))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if n.spec.FakeClock {
		for _, lib := range faketime.Libs {
			if _, err := n.rt.cli.ContainerStatPath(ctx, n.c.GetContainerID(), client.ContainerStatPathOptions{Path: lib}); err != nil {
				return fmt.Errorf("%s needs %s in its image %s for clock faults: build the image with \"lockcheck images build\" or docker/redis.Dockerfile", n.Name(), lib, n.image)
			}
		}
	}
	return nil
}

func (n *Node) address() (netip.Addr, error) {
	ip, err := netip.ParseAddr(n.ep.Host)
	if err != nil {
		return ip, fmt.Errorf("%s: %w (%q)", n.Name(), errNoAddress, n.ep.Host)
	}
	return ip, nil
}

// start starts the container and waits until the server is ready.
func (n *Node) start(ctx context.Context) error {
	if _, err := n.rt.cli.ContainerStart(ctx, n.c.GetContainerID(), client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("starting %s: %v", n.Name(), oneLine(err))
	}
	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for try := 0; ; try++ {
		if try%10 == 0 {
			st, err := n.state(readyCtx)
			if err != nil {
				return err
			}
			if !st.Running {
				return fmt.Errorf("%s exited before it was ready (exit code %d): %s", n.Name(), st.ExitCode, n.lastWords(readyCtx))
			}
			n.mu.Lock()
			n.pid = st.Pid
			n.mu.Unlock()
		}
		if n.spec.Ready(readyCtx, n.ep.Addr()) == nil {
			return nil
		}
		select {
		case <-readyCtx.Done():
			return fmt.Errorf("%s did not answer on %s within 30s (see %s)", n.Name(), n.ep.Addr(), n.ep.Dir)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (n *Node) state(ctx context.Context) (*container.State, error) {
	res, err := n.rt.cli.ContainerInspect(ctx, n.c.GetContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspecting %s: %v", n.Name(), oneLine(err))
	}
	if res.Container.State == nil {
		return nil, fmt.Errorf("inspecting %s: no state", n.Name())
	}
	return res.Container.State, nil
}

// lastWords is the last line the server wrote, to its log file in the node
// directory or to the container's output.
func (n *Node) lastWords(ctx context.Context) string {
	var text string
	matches, _ := filepath.Glob(filepath.Join(n.ep.Dir, "*.log"))
	for _, m := range matches {
		if data, err := os.ReadFile(m); err == nil {
			text += string(data)
		}
	}
	if rc, err := n.c.Logs(ctx); err == nil {
		var b strings.Builder
		buf := make([]byte, 64<<10)
		for {
			k, err := rc.Read(buf)
			b.Write(buf[:k])
			if err != nil {
				break
			}
		}
		rc.Close()
		text += "\n" + b.String()
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return "no output"
	}
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[i+1:]
	}
	// Docker's log stream frames each line with an 8-byte header.
	return strings.TrimLeft(text, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f")
}

// Signal sends sig to the server (PID 1 of the container) through the
// engine. A SIGSTOP returns only once every thread of the server stopped,
// where this host's /proc shows them.
func (n *Node) Signal(sig syscall.Signal) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := n.rt.cli.ContainerKill(ctx, n.c.GetContainerID(), client.ContainerKillOptions{Signal: signalName(sig)})
	if err != nil {
		if strings.Contains(err.Error(), "is not running") || isNotFound(err) {
			return nil // like ESRCH: nothing to signal
		}
		return fmt.Errorf("signalling %s: %v", n.Name(), oneLine(err))
	}
	if sig == syscall.SIGSTOP {
		return procstate.WaitStopped(n.PID(), 5*time.Second)
	}
	return nil
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGSTOP:
		return "SIGSTOP"
	case syscall.SIGCONT:
		return "SIGCONT"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return fmt.Sprint(int(sig))
}

// kill ends the server and waits until the container has stopped.
func (n *Node) kill(ctx context.Context) error {
	n.Signal(syscall.SIGCONT) //nolint:errcheck // it may be stopped by a fault
	if err := n.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	wait := n.rt.cli.ContainerWait(ctx, n.c.GetContainerID(), client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case <-wait.Result:
		return nil
	case err := <-wait.Error:
		if isNotFound(err) {
			return nil
		}
		return fmt.Errorf("waiting for %s to stop: %v", n.Name(), oneLine(err))
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Restart kills the server and starts its container again, with the same
// address and node directory, first removing its data when wipe is set.
func (n *Node) Restart(ctx context.Context, wipe bool) error {
	if err := n.kill(ctx); err != nil {
		return err
	}
	if wipe {
		for _, p := range n.spec.DataPaths {
			if err := os.RemoveAll(filepath.Join(n.ep.Dir, p)); err != nil {
				return err
			}
		}
	}
	return n.start(ctx)
}

// Stop removes the node's container.
func (n *Node) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n.remove(ctx)
}

func (n *Node) remove(ctx context.Context) {
	n.closeShaping()
	if n.c == nil {
		return
	}
	_, err := n.rt.cli.ContainerRemove(ctx, n.c.GetContainerID(), client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !isNotFound(err) {
		n.rt.log.Warn("removing a container", "node", n.Name(), "err", err)
	}
}

// Partition disconnects the node from the run's network: neither the other
// nodes nor the clients (on the host) reach it, and it reaches no one.
func (n *Node) Partition(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut {
		return nil
	}
	if _, err := n.rt.cli.NetworkDisconnect(ctx, n.rt.net.ID, client.NetworkDisconnectOptions{Container: n.c.GetContainerID(), Force: true}); err != nil {
		return fmt.Errorf("disconnecting %s: %v", n.Name(), oneLine(err))
	}
	n.cut = true
	return nil
}

// Heal connects a partitioned node again, at its old address.
func (n *Node) Heal(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.cut {
		return nil
	}
	ip, err := n.address()
	if err != nil {
		return err
	}
	_, err = n.rt.cli.NetworkConnect(ctx, n.rt.net.ID, client.NetworkConnectOptions{
		Container:      n.c.GetContainerID(),
		EndpointConfig: &network.EndpointSettings{IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: ip}},
	})
	if err != nil {
		return fmt.Errorf("reconnecting %s: %v", n.Name(), oneLine(err))
	}
	n.cut = false
	return nil
}

var errNoAddress = errors.New("the node has no address on the run's network")
