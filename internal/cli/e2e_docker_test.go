package cli

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/harness/container/containertest"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
)

// Under --runtime docker every backend gives the verdicts it gives as local
// processes: its run without faults passes and its signature fault breaks
// it. The table's verdicts are the process runtime's, which each backend's
// own end-to-end tests hold; running every line under both runtimes here
// doubled the test's 5 minutes for no check the others do not make.
// Redlock's signature is clock-pause with a 2 s TTL: the paused
// minority must be back within one lease, and a container restart takes
// 0.3 s on one machine, 1.5 s on another; where it is too slow the fault
// misses, the run is unknown and names the TTL that would do.
func TestDockerRuntimeGivesTheSameVerdicts(t *testing.T) {
	testtier.Long(t)
	cli := containertest.Engine(t)
	images := containertest.Images(t, cli)
	t.Cleanup(func() {
		assert.Zero(t, containertest.Leftovers(t, cli), "no container or network of any run is left")
	})
	docker := []string{"--runtime", "docker"}
	for _, img := range catalog.Images() {
		docker = append(docker, "--"+img.Param(), images[img.Kind])
	}
	// The runs without faults lease for 2 s, not the default 500 ms: on a
	// loaded machine a client stalled past a 500 ms lease between its check
	// and its write is a real double ownership, and Redlock's TTL/10 per
	// node (50 ms) is missed by five containers behind docker's port
	// forwarding, so no grant at all.
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"redis, no faults", []string{"--backend", "redis", "--nemesis", "none", "--ttl", "2s", "--time-limit", "4s"}, exitValid},
		{"redis, pause-holder", []string{"--backend", "redis", "--nemesis", "pause-holder", "--time-limit", "8s"}, exitInvalid},
		{"sentinel, no faults", []string{"--backend", "sentinel", "--nemesis", "none", "--ttl", "2s", "--time-limit", "4s"}, exitValid},
		{"sentinel, failover-lost-lock", []string{"--backend", "sentinel", "--nemesis", "failover-lost-lock", "--ttl", "10s",
			"--pause", "4s", "--nemesis-interval", "2s", "--time-limit", "15s"}, exitInvalid},
		// Jepsen's Redis partition: proxies in the process runtime, per-container rules in docker.
		{"sentinel, partition-minority", []string{"--backend", "sentinel", "--nemesis", "partition-minority", "--workload", "unfenced", "--ttl", "10s",
			"--pause", "12s", "--nemesis-interval", "3s", "--time-limit", "20s"}, exitInvalid},
		{"redlock, no faults", []string{"--backend", "redlock", "--nemesis", "none", "--ttl", "2s", "--time-limit", "4s"}, exitValid},
		{"etcd, partition-minority", []string{"--backend", "etcd", "--nemesis", "partition-minority", "--ttl", "2s", "--time-limit", "12s"}, exitValid},
		{"redlock, clock-pause", []string{"--backend", "redlock", "--nemesis", "clock-pause", "--ttl", "2s", "--time-limit", "15s"}, exitInvalid},
		{"etcd, no faults", []string{"--backend", "etcd", "--nemesis", "none", "--ttl", "2s", "--time-limit", "4s"}, exitValid},
		{"etcd, pause-holder", []string{"--backend", "etcd", "--nemesis", "pause-holder", "--ttl", "1s", "--time-limit", "12s"}, exitInvalid},
		{"zookeeper, no faults", []string{"--backend", "zookeeper", "--nemesis", "none", "--ttl", "2s", "--time-limit", "4s"}, exitValid},
		{"zookeeper, pause-holder", []string{"--backend", "zookeeper", "--nemesis", "pause-holder", "--pause", "2s", "--time-limit", "12s"}, exitInvalid},
		{"postgres, kill-session", []string{"--backend", "postgres", "--workload", "unfenced", "--nemesis", "kill-session", "--pause", "1s", "--time-limit", "12s"}, exitInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Each run has a network and containers of its own.
			t.Parallel()
			// A fault that missed its moment on this machine (a container
			// restart slower than the lease) makes the run unknown, and says
			// why; the verdict is compared where the fault landed.
			inDocker, resDocker, landedDocker := runRuntime(t, append(tt.args, docker...))
			if landedDocker {
				assert.Equal(t, tt.want, inDocker.code, "docker runtime: %s", resDocker.Reason)
			}
		})
	}
}

// runRuntime runs one line of the runtime comparison: a run without faults
// must succeed, one with faults may miss them (runFault).
func runRuntime(t *testing.T, args []string) (invocation, *results.Results, bool) {
	t.Helper()
	if slices.Contains(args, "none") {
		inv, res, _ := runLockcheck(t, args...)
		return inv, res, true
	}
	inv, res, _, landed := runFault(t, args...)
	return inv, res, landed
}

// The runtimes' bad input: an unknown runtime, and a partition or a link
// fault of processes reached directly (every backend's nodes can run
// behind lockcheck's proxies now, so --network direct is the way to have
// none).
func TestRuntimeRefusesBadInput(t *testing.T) {
	store := t.TempDir()
	assertRefused(t, store, []string{"run", "--out", store}, []badInput{
		{"unknown runtime", []string{"--runtime", "podman"}, `--runtime "podman": choose process or docker`},
		{"partition of processes reached directly", []string{"--network", "direct", "--nemesis", "partition"}, "--nemesis partition needs nodes that can be cut off the network (--runtime docker, or --runtime process with --network proxy); backend redis under --runtime process has none"},
		{"link fault of processes reached directly", []string{"--network", "direct", "--nemesis", "slow-link"}, "--nemesis slow-link needs links between clients and nodes that lockcheck can slow or reset one by one (--runtime process with --network proxy, or --runtime docker as root); backend redis under --runtime process has none"},
	})
}

// An image the engine does not have is one line naming the command that
// builds lockcheck's images; nothing is pulled.
func TestDockerRuntimeRefusesAMissingImage(t *testing.T) {
	containertest.Engine(t)
	store := t.TempDir()
	assertRefused(t, store, []string{"run", "--out", store}, []badInput{
		{"missing image", []string{"--runtime", "docker", "--redis-image", "lockcheck/redis:no-such-tag"},
			`image lockcheck/redis:no-such-tag is not in the Docker engine: build lockcheck's images with "lockcheck images build"`},
	})
}
