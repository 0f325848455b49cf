package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/nemesis"
)

// The runtimes a run's nodes can run under.
const (
	RuntimeProcess = "process" // local processes on loopback (the default)
	RuntimeDocker  = "docker"  // containers on a private Docker network
)

// ParamRuntime is the run param that records the runtime; each image a
// run uses has its own (backends.Image.Param).
const ParamRuntime = "runtime"

// server is a node of the lock service, whichever runtime runs it.
type server interface {
	nemesis.Restarter
	SetClock(offset time.Duration) error
	Clock() time.Duration
	Endpoint() backends.Endpoint
	Stop()
}

// Docker is the docker runtime (--runtime docker), which importing package
// harness/container/withdocker sets. It links a Docker client, a large
// dependency: a program without it (a user's own, which registers a lock)
// runs nodes as local processes only.
var Docker DockerRuntime

// DockerRuntime runs a topology's nodes as containers on a network of the
// run's own, and builds the images they run in.
type DockerRuntime interface {
	// CheckImages checks that the engine answers and holds every image.
	CheckImages(ctx context.Context, log *slog.Logger, refs []string) error
	// Start starts specs as containers of images (kind to image), their
	// directories under root, named for run; stop removes them all.
	Start(ctx context.Context, specs []backends.NodeSpec, root string, images map[string]string, run string, log *slog.Logger) (nodes []Container, stop func(), err error)
	// Build builds each image from this machine's files (program finds a
	// program's executable, self is lockcheck's) unless an up-to-date
	// one is there or force, saying what it did in one line each.
	Build(ctx context.Context, images map[*backends.Image]string, program func(name string) string, self string, force bool, report func(line string)) error
}

// Container is a node that runs in a container of the image Image.
type Container interface {
	server
	Image() string
}

// errNoDocker refuses --runtime docker in a program without the runtime.
var errNoDocker = errors.New(`--runtime docker: this program has no docker runtime (lockcheck's own command has; a program of yours imports _ "github.com/lockcheck/lockcheck/harness/container/withdocker")`)

// topology is a started lock service.
type topology struct {
	servers []server
	// versionKey names what a node's version describes: its program, or
	// its image in a container.
	versionKey func(i int) string
	// close heals what faults left (clocks) and removes every node.
	close func()
	// links cuts single links of the run's network, when its faults need
	// that (process runtime: the proxies, ParamNetwork; docker: rules in
	// each node's network namespace); close undoes it.
	links links
}

// endpoints are where the servers listen.
func (t *topology) endpoints() []backends.Endpoint {
	eps := make([]backends.Endpoint, len(t.servers))
	for i, s := range t.servers {
		eps[i] = s.Endpoint()
	}
	return eps
}

// runtimeOf is the run's runtime, process by default.
func runtimeOf(cfg Config) string {
	if rt := cfg.Run.Params[ParamRuntime]; rt != "" {
		return rt
	}
	return RuntimeProcess
}

// images maps the kind of each image the nodes run in to the image chosen
// for it: its run param, else the image's default tag.
func images(cfg Config, specs []backends.NodeSpec) map[string]string {
	out := map[string]string{}
	for _, s := range specs {
		if s.Image == nil {
			continue
		}
		ref := cfg.Run.Params[s.Image.Param()]
		if ref == "" {
			ref = s.Image.Tag
		}
		out[s.Image.Kind] = ref
	}
	return out
}

// preflightRuntime checks what the runtime needs before anything starts:
// the server programs for local processes; the engine and the images for
// containers.
func preflightRuntime(cfg Config, b catalog.Backend, specs []backends.NodeSpec) error {
	switch runtimeOf(cfg) {
	case RuntimeProcess:
		if err := checkNetwork(cfg, specs); err != nil {
			return err
		}
		return checkPrograms(cfg.Programs, b, cfg.Run.Params)
	case RuntimeDocker:
		for _, s := range specs {
			if s.Image == nil {
				return fmt.Errorf("--runtime docker: backend %s has no container image for its node %s; run it with --runtime process", b.Name, s.Name)
			}
		}
		if Docker == nil {
			return errNoDocker
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var need []string
		for _, ref := range images(cfg, specs) {
			need = append(need, ref)
		}
		slices.Sort(need)
		return Docker.CheckImages(ctx, cfg.Logger, need)
	}
	return fmt.Errorf("--runtime %q: choose process or docker", runtimeOf(cfg))
}

// startTopologyFor brings the lock service up under the run's runtime.
func startTopologyFor(ctx context.Context, cfg Config, p *procs, specs []backends.NodeSpec, root string, log *slog.Logger) (*topology, error) {
	if runtimeOf(cfg) != RuntimeDocker {
		nodes, network, err := startNodes(ctx, p, specs, root, networkOf(cfg, specs) == NetworkProxy)
		if err != nil {
			return nil, err
		}
		t := &topology{versionKey: func(i int) string { return specs[i].Program }}
		if network != nil {
			t.links = &proxyLinks{network}
		}
		for _, n := range nodes {
			t.servers = append(t.servers, n)
		}
		t.close = func() {
			resetClocks(nodes)
			for _, n := range nodes {
				n.Stop()
			}
			if network != nil {
				network.Close() //nolint:errcheck // closing listeners of a run that ends
			}
		}
		return t, nil
	}
	if Docker == nil {
		return nil, errNoDocker
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	nodes, stop, err := Docker.Start(ctx, specs, abs, images(cfg, specs), runName(root), log)
	if err != nil {
		return nil, err
	}
	t := &topology{versionKey: func(i int) string { return specs[i].Command + " in " + nodes[i].Image() }}
	for _, n := range nodes {
		t.servers = append(t.servers, n)
	}
	if linksNeeded(cfg) {
		if t.links, err = newContainerLinks(nodes); err != nil {
			stop()
			return nil, err
		}
	}
	t.close = func() {
		// A clock is a file in the node's directory, kept as evidence:
		// put it back as the process runtime does.
		resetClocks(nodes)
		stop()
	}
	return t, nil
}

// runName names a run's containers: the run directory and a random suffix,
// since tests start runs in parallel.
func runName(root string) string {
	var b [3]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return filepath.Base(filepath.Dir(root)) + "-" + hex.EncodeToString(b[:])
}
