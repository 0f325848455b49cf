package harness

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/workloads/resource"
)

// Cluster is a lock service's nodes kept up across several runs: a soak's
// segments run one after another against the same servers (Config.Cluster),
// each with its own workers, resource and history. A run heals what its
// faults left (every fault heals itself as its run ends; the clocks are
// put back) and leaves the nodes serving for the next.
type Cluster struct {
	procs *procs
	specs []backends.NodeSpec
	top   *topology
	dir   string
}

// KeepsCluster says whether the runs of cfg can share a Cluster: they
// start nodes (no --addr), and nothing of one run's resource lives in them
// (a database resource keeps its value and audit table from run to run,
// which the next run's check would count as its own).
func KeepsCluster(cfg Config) bool {
	return len(cfg.Addrs) == 0 && resourceOf(cfg) == resource.Memory
}

// StartCluster starts the nodes of cfg's topology, their logs under dir,
// and waits until it serves; Close removes them. cfg must keep a cluster
// (KeepsCluster).
func StartCluster(ctx context.Context, cfg Config, dir string) (*Cluster, error) {
	if !KeepsCluster(cfg) {
		return nil, errors.New("a run with --addr or a database resource cannot keep its cluster up between runs")
	}
	backend, err := Preflight(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{procs: newProcs(), specs: nodeSpecs(cfg, backend), dir: dir}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c.top, err = startTopologyFor(ctx, cfg, c.procs, c.specs, dir, log)
	if err != nil {
		c.procs.killAll(5 * time.Second)
		return nil, interrupted(ctx, err, nodeNames(c.specs))
	}
	return c, nil
}

// Close heals what faults left and removes every node.
func (c *Cluster) Close() {
	c.top.close()
	c.procs.killAll(5 * time.Second)
}
