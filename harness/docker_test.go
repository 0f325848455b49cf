package harness

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/redis"
	"github.com/lockcheck/lockcheck/harness/container/containertest"
	"github.com/lockcheck/lockcheck/history"
)

// dockerConfig is a run of backend under the docker runtime, or skips the
// test where no Docker engine answers.
func dockerConfig(t *testing.T, backend string, faults []string, limit time.Duration) Config {
	t.Helper()
	cli := containertest.Engine(t)
	images := containertest.Images(t, cli)
	t.Cleanup(func() {
		assert.Zero(t, containertest.Leftovers(t, cli), "no container or network of the run is left")
	})
	cfg := testConfig(t, redis.Correct, "unfenced", faults, limit)
	cfg.Run.Backend = backend
	cfg.Run.Params = map[string]string{ParamRuntime: RuntimeDocker}
	for _, img := range catalog.Images() {
		cfg.Run.Params[img.Param()] = images[img.Kind]
	}
	return cfg
}

func readHistory(t *testing.T, dir string) *history.History {
	t.Helper()
	h, err := history.ReadFile(filepath.Join(dir, "history.jsonl"))
	require.NoError(t, err)
	return h
}

// nemesisEvents lists the nemesis events with verb f.
func nemesisEvents(h *history.History, f string) []history.Event {
	var out []history.Event
	for _, e := range h.Events {
		if e.Process == history.Nemesis && e.F == f && e.Value != nil {
			out = append(out, e)
		}
	}
	return out
}

// A run cancelled (Ctrl-C) while a container is stopped removes every
// container and the network, and keeps its history.
func TestDockerCancelledRunLeavesNothingBehind(t *testing.T) {
	cfg := dockerConfig(t, "redis", []string{"pause-node"}, time.Minute)
	cfg.Pause = 30 * time.Second // the node is still stopped when the run is cancelled
	cfg.Interval = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Cancel once the nemesis has stopped the node.
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			files, _ := filepath.Glob(filepath.Join(cfg.Out, "*", "history.jsonl"))
			for _, f := range files {
				if data, err := os.ReadFile(f); err == nil && strings.Contains(string(data), `"f":"pause"`) {
					cancel()
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
	}()
	out, err := Run(ctx, cfg)
	require.NoError(t, err)
	assert.True(t, out.Interrupted)
	h := readHistory(t, out.Dir)
	assert.NotEmpty(t, nemesisEvents(h, history.NemPause), "the pause is in the history")
	ends := nemesisEvents(h, history.NemRunEnd)
	require.Len(t, ends, 1)
	assert.Equal(t, "interrupted", ends[0].Value.Detail)
	assert.NotEmpty(t, h.Header.Config.Versions["redis-server in "+cfg.Run.Params[redis.Image.Param()]], "the report names the image")
}

// runPartition runs cfg and returns its history with the first partition
// and the heal that ended it, which it checks: the same node, healed with
// no error, after --pause.
func runPartition(t *testing.T, cfg Config) (h *history.History, cut, heal history.Event) {
	t.Helper()
	out, err := Run(context.Background(), cfg)
	require.NoError(t, err)
	h = readHistory(t, out.Dir)
	cuts, heals := nemesisEvents(h, history.NemPartition), nemesisEvents(h, history.NemHeal)
	require.NotEmpty(t, cuts)
	require.NotEmpty(t, heals)
	cut, heal = cuts[0], heals[0]
	assert.Equal(t, cut.Value.Target, heal.Value.Target)
	assert.Empty(t, heal.Value.Detail, "the heal succeeded")
	assert.GreaterOrEqual(t, heal.Time-cut.Time, cfg.Pause.Nanoseconds())
	assertLanded(t, h, cut.Value.Step)
	return h, cut, heal
}

// assertLanded checks that the nemesis step numbered step recorded that its
// fault landed.
func assertLanded(t *testing.T, h *history.History, step int) {
	t.Helper()
	for _, e := range nemesisEvents(h, history.NemLanding) {
		if e.Value.Step == step {
			require.NotNil(t, e.Value.Landed)
			assert.True(t, *e.Value.Landed, "step %d (%s) missed: %s", step, e.Value.Fault, e.Value.Detail)
			return
		}
	}
	t.Errorf("step %d recorded no landing", step)
}

// partition cuts the Sentinel master off: the sentinels promote a replica
// while it is away, and it is healed after --pause.
func TestDockerPartitionCutsOffTheSentinelMaster(t *testing.T) {
	cfg := dockerConfig(t, "sentinel", []string{"partition"}, 12*time.Second)
	cfg.Pause = 5 * time.Second // longer than down-after (1 s) and the failover
	cfg.Interval = 2 * time.Second
	h, cut, heal := runPartition(t, cfg)
	// The sentinels may have moved the master before the first fault (a
	// busy machine lets down-after pass at start-up): the partition cuts
	// off the master of the moment.
	master := "redis-0"
	for _, e := range nemesisEvents(h, history.NemSwitchMaster) {
		if e.Time < cut.Time {
			master = e.Value.Target
		}
	}
	assert.Equal(t, master, cut.Value.Target, "the partition isolates the master of the moment")
	switched := slices.ContainsFunc(nemesisEvents(h, history.NemSwitchMaster), func(e history.Event) bool {
		return e.Time > cut.Time && e.Time < heal.Time
	})
	assert.True(t, switched, "the sentinels promoted a replica while the master was cut off")
}

// A partitioned Redlock node is one of five: grants go on without it on
// the other four, and none names it while it is away.
func TestDockerPartitionCutsOffARedlockNode(t *testing.T) {
	cfg := dockerConfig(t, "redlock", []string{"partition"}, 7*time.Second)
	cfg.Pause = 3 * time.Second
	cfg.Interval = 2 * time.Second
	cfg.Run.Params["redlock-tries"] = "1"
	h, cutEvent, healEvent := runPartition(t, cfg)
	cut, healed, node := cutEvent.Time, healEvent.Time, cutEvent.Value.Target
	assert.True(t, strings.HasPrefix(node, "redlock-"), node)
	grants := 0
	for _, e := range h.Events {
		if e.Type != history.OK || e.F != history.FAcquire || e.Value == nil || e.Time < cut+cfg.OpTimeout.Nanoseconds() || e.Time > healed {
			continue
		}
		grants++
		assert.NotContains(t, e.Value.Nodes, node, "a grant while %s was cut off names it", node)
	}
	assert.Positive(t, grants, "the other four nodes still grant the lock")
}

// partition cuts the ZooKeeper leader off: the other two elect a leader of
// a higher epoch while it is away, and it is healed after --pause.
func TestDockerPartitionCutsOffTheZooKeeperLeader(t *testing.T) {
	cfg := dockerConfig(t, "zookeeper", []string{"partition"}, 10*time.Second)
	cfg.Run.Variant, cfg.Run.Workload = "", "fenced"
	cfg.Pause = 3 * time.Second // longer than the followers' 500 ms syncLimit and an election
	cfg.Interval = 2 * time.Second
	h, cut, heal := runPartition(t, cfg)
	var before, during []history.Event
	for _, e := range nemesisEvents(h, history.NemRole) {
		switch {
		case !strings.HasPrefix(e.Value.Detail, "leader"):
		case e.Time < cut.Time:
			before = append(before, e)
		case e.Time < heal.Time:
			during = append(during, e)
		}
	}
	require.NotEmpty(t, before, "the leader was known before the partition")
	assert.Equal(t, before[len(before)-1].Value.Target, cut.Value.Target, "the partition cuts the leader off")
	require.NotEmpty(t, during, "the others elected a leader while it was cut off")
	assert.NotEqual(t, cut.Value.Target, during[0].Value.Target)
}
