// Package container is the docker runtime: it runs the nodes of a run's
// lock service as Docker containers on a private network of their own.
// Containers and the network are created, started and removed through
// testcontainers-go; what it lacks (signals, disconnecting a container from
// a network, importing an image) goes through the Docker client it exposes.
//
// testcontainers' reaper (Ryuk) is an image pulled from a registry, which a
// machine with no registry cannot do, so it is turned off: every container
// and network carries labels naming the lockcheck process that made it, the
// runtime removes its own at the end, and a new runtime first removes those
// whose process is gone (a run killed with SIGKILL).
package container

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/internal/procstate"
)

// Labels on everything a runtime creates.
const (
	// LabelOwner names the lockcheck process that made the object:
	// host/pid/start time. An object whose owner is gone is a leftover.
	LabelOwner = "org.lockcheck.owner"
	// LabelRun names the run.
	LabelRun = "org.lockcheck.run"
)

// Options configure a runtime.
type Options struct {
	// Images maps an image kind (backends.Image.Kind) to the image its
	// nodes run in.
	Images map[string]string
	// Run names the run in container names and labels.
	Run    string
	Logger *slog.Logger
}

// Runtime runs one run's nodes as containers.
type Runtime struct {
	cli    *testcontainers.DockerClient
	net    *testcontainers.DockerNetwork
	subnet netip.Prefix
	images map[string]string
	run    string
	labels map[string]string
	log    *slog.Logger

	mu    sync.Mutex
	nodes []*Node
}

// ErrNoEngine means no Docker engine answered.
var ErrNoEngine = errors.New("no Docker engine answers")

// Connect returns a client of the local Docker engine, with testcontainers
// set up for a machine without a registry.
func Connect(ctx context.Context, log *slog.Logger) (*testcontainers.DockerClient, error) {
	// Read once by testcontainers, before its first call.
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true") //nolint:errcheck // cannot fail for a valid name
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tclog.SetDefault(slogPrintf{log})
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w (%v): start the Docker daemon (systemctl start docker) or use --runtime process", ErrNoEngine, oneLine(err))
	}
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("%w (%v): start the Docker daemon (systemctl start docker) or use --runtime process", ErrNoEngine, oneLine(err))
	}
	return cli, nil
}

// slogPrintf carries testcontainers' log lines into lockcheck's log.
type slogPrintf struct{ log *slog.Logger }

func (s slogPrintf) Printf(format string, v ...any) {
	s.log.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)), "from", "testcontainers")
}

// CheckImages fails, naming the command that builds it, when an image is
// not present in the engine: nothing is pulled behind the user's back.
func CheckImages(ctx context.Context, cli *testcontainers.DockerClient, images []string) error {
	for _, ref := range images {
		if _, err := cli.ImageInspect(ctx, ref); err != nil {
			if isNotFound(err) {
				return fmt.Errorf("image %s is not in the Docker engine: build lockcheck's images with \"lockcheck images build\", or pull or build %s yourself (docker/ has Dockerfiles)", ref, ref)
			}
			return fmt.Errorf("inspecting image %s: %v", ref, oneLine(err))
		}
	}
	return nil
}

// New sweeps the leftovers of crashed runs and creates the run's network.
func New(ctx context.Context, cli *testcontainers.DockerClient, opts Options) (*Runtime, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	owner, err := Owner()
	if err != nil {
		return nil, err
	}
	r := &Runtime{
		cli: cli, images: opts.Images, run: opts.Run, log: log,
		labels: map[string]string{LabelOwner: owner, LabelRun: opts.Run},
	}
	if n, err := Sweep(ctx, cli); err != nil && ctx.Err() == nil { // after Ctrl-C, the interruption is the story
		log.Warn("removing leftovers of earlier runs", "err", err)
	} else if n > 0 {
		log.Info("removed leftovers of earlier runs", "objects", n)
	}
	if err := r.createNetwork(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// createNetwork makes a bridge network with a subnet of lockcheck's choice:
// a node keeps its address when it restarts or rejoins after a partition
// only on a network whose subnet was given, not picked by the engine.
func (r *Runtime) createNetwork(ctx context.Context) error {
	var lastErr error
	for try := 0; try < 32; try++ {
		// 172.28.0.0/14 is inside Docker's default pools yet rarely used:
		// the engine hands out 172.17-172.27 first.
		subnet := netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(28 + rand.IntN(4)), byte(rand.IntN(256)), 0}), 24)
		nw, err := tcnetwork.New(ctx,
			tcnetwork.WithLabels(r.labels),
			tcnetwork.WithIPAM(&network.IPAM{Driver: "default", Config: []network.IPAMConfig{{
				Subnet: subnet, Gateway: subnet.Addr().Next(),
			}}}),
		)
		if err == nil {
			r.net, r.subnet = nw, subnet
			return nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "overlap") {
			break
		}
	}
	return fmt.Errorf("creating the run's Docker network: %v", oneLine(lastErr))
}

// Close removes every container and the network of the run. It uses its
// own deadline: it runs after Ctrl-C cancelled the run's context.
func (r *Runtime) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.mu.Lock()
	nodes := r.nodes
	r.nodes = nil
	r.mu.Unlock()
	eachNode(nodes, func(n *Node) error { n.remove(ctx); return nil }) //nolint:errcheck // remove logs its own errors
	if r.net != nil {
		if err := r.net.Remove(ctx); err != nil && !isNotFound(err) {
			r.log.Warn("removing the run's network", "network", r.net.Name, "err", err)
		}
	}
}

// allocate gives every node of a topology its address on the run's network
// and its ports: inside its own network namespace each node has the
// conventional ports of its image.
func (r *Runtime) allocate(specs []backends.NodeSpec, root string) ([]backends.Endpoint, error) {
	eps := make([]backends.Endpoint, len(specs))
	addr := r.subnet.Addr().Next() // the gateway
	for i, s := range specs {
		addr = addr.Next()
		base := 7000
		if s.Image != nil && s.Image.Port != 0 {
			base = s.Image.Port
		}
		eps[i] = backends.Endpoint{Name: s.Name, Host: addr.String(), Bind: "0.0.0.0", Dir: root + "/" + s.Name}
		for j := 0; j < max(s.Ports, 1); j++ {
			eps[i].Ports = append(eps[i].Ports, base+j)
		}
		if err := os.MkdirAll(eps[i].Dir, 0o755); err != nil {
			return nil, err
		}
	}
	return eps, nil
}

// image is the image a node declared to run in img runs in.
func (r *Runtime) image(img *backends.Image) (string, error) {
	if img == nil {
		return "", errors.New("the backend names no container image for its nodes")
	}
	ref, ok := r.images[img.Kind]
	if !ok || ref == "" {
		return "", fmt.Errorf("no image for %s nodes (pass --%s)", img.Kind, img.Param())
	}
	return ref, nil
}

// Owner names this process as LabelOwner does.
func Owner() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", err
	}
	start, err := procstate.StartTime(os.Getpid())
	if err != nil {
		return "", err
	}
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + start, nil
}

// ownerAlive reports whether the lockcheck process named by owner still
// runs (a killed one that is not reaped yet does not). An owner on another host (an engine shared by several machines) is
// not this machine's to judge, so it counts as alive.
func ownerAlive(owner string) bool {
	parts := strings.Split(owner, "/")
	if len(parts) != 3 {
		return false
	}
	if host, err := os.Hostname(); err != nil || host != parts[0] {
		return true
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil {
		return false
	}
	return procstate.Runs(pid, parts[2])
}

// Sweep removes every container and network lockcheck made whose lockcheck
// process is gone, and returns how many it removed.
func Sweep(ctx context.Context, cli *testcontainers.DockerClient) (int, error) {
	removed := 0
	filter := client.Filters{}.Add("label", LabelOwner)
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, c := range cs.Items {
		if ownerAlive(c.Labels[LabelOwner]) {
			continue
		}
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isNotFound(err) {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: filter})
	if err != nil {
		return removed, err
	}
	for _, n := range ns.Items {
		if ownerAlive(n.Labels[LabelOwner]) {
			continue
		}
		if _, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !isNotFound(err) {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

func isNotFound(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "No such") || strings.Contains(strings.ToLower(err.Error()), "not found"))
}

// oneLine keeps the first line of an engine's error.
func oneLine(err error) string {
	s := strings.TrimSpace(err.Error())
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
