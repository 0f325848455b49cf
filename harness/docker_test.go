package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/redis"
	"github.com/lockcheck/lockcheck/harness/container/containertest"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/nemesis"
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
	testtier.Long(t)
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
func assertLanded(t *testing.T, h *history.History, step *int) {
	t.Helper()
	require.NotNil(t, step, "the fault's events carry its step")
	for _, e := range nemesisEvents(h, history.NemLanding) {
		if e.Value.Step != nil && *e.Value.Step == *step {
			require.NotNil(t, e.Value.Landed)
			assert.True(t, *e.Value.Landed, "step %d (%s) missed: %s", step, e.Value.Fault, e.Value.Detail)
			return
		}
	}
	t.Errorf("step %d recorded no landing", *step)
}

// partition cuts the Sentinel master off: the sentinels promote a replica
// while it is away, and it is healed after --pause.
func TestDockerPartitionCutsOffTheSentinelMaster(t *testing.T) {
	testtier.Long(t)
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
	testtier.Long(t)
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
	testtier.Long(t)
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

// watchRules polls the iptables rules of the test's containers while the
// test runs; seen reports whether any held want.
func watchRules(t *testing.T, want string) (seen func() bool) {
	t.Helper()
	cli := containertest.Engine(t)
	var found atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil && !found.Load() {
			if rules, err := containertest.Rules(ctx, cli); err == nil && strings.Contains(rules, want) {
				found.Store(true)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return found.Load
}

// linkFault runs cfg and returns its history with the first start of a
// link fault (verb start) and its end, which it checks: a client's links
// to the node, healed with no error, and the step landed unless the run
// was cancelled.
func linkFault(t *testing.T, ctx context.Context, cfg Config, start, end string) (h *history.History, on, off history.Event, out Outcome) {
	t.Helper()
	out, err := Run(ctx, cfg)
	require.NoError(t, err)
	h = readHistory(t, out.Dir)
	starts, ends := nemesisEvents(h, start), nemesisEvents(h, end)
	require.NotEmpty(t, starts)
	require.NotEmpty(t, ends)
	on, off = starts[0], ends[0]
	assert.True(t, strings.HasPrefix(on.Value.Target, "c"), "a client's links are shaped: %s", on.Value.Target)
	assert.Equal(t, []string{"redis-0"}, on.Value.Links)
	assert.Equal(t, on.Value.Target, off.Value.Target)
	assert.Empty(t, off.Value.Detail, "the heal took the rules out")
	if !out.Interrupted {
		assertLanded(t, h, on.Value.Step)
	}
	return h, on, off, out
}

// lockOps are the lock operations (those that reach the node) of the
// client that was process client when on was recorded, each with its
// completion, of those under way at some time between on and off. A client whose
// operation ends unknown goes on as another process (workloads' retire):
// the processes of a client are those of its slot.
func lockOps(h *history.History, clients int, client string, on, off history.Event) [][2]history.Event {
	var ops [][2]history.Event
	invoked := map[history.Process]history.Event{}
	for _, e := range h.Events {
		if e.Process == history.Nemesis || int(e.Process)%clients != int(processOf(client))%clients || (e.F != history.FAcquire && e.F != history.FRelease) {
			continue
		}
		if e.Type == history.Invoke {
			invoked[e.Process] = e
			continue
		}
		if inv, ok := invoked[e.Process]; ok && inv.Time < off.Time && e.Time > on.Time {
			ops = append(ops, [2]history.Event{inv, e})
		}
		delete(invoked, e.Process)
	}
	return ops
}

// processOf reads a client's process number from its name, c3.
func processOf(name string) history.Process {
	n, _ := strconv.Atoi(strings.TrimPrefix(name, "c"))
	return history.Process(n)
}

// slow-link under docker slows one client's link to the Redis node: while
// it is on, the node's rules send the client's packets to lockcheck's
// queue, and a lock operation of the client then takes at least the
// latency (a lower bound: a busy machine only adds to it); it lands and
// heals with no error.
func TestDockerSlowLinkSlowsAClientsLink(t *testing.T) {
	testtier.Long(t)
	cfg := dockerConfig(t, "redis", []string{"slow-link"}, 6*time.Second)
	cfg.Pause, cfg.Interval = 2*time.Second, time.Second
	const latency = 400 * time.Millisecond
	cfg.Run.Params[nemesis.ParamLatency] = latency.String()
	cfg.Run.Params[nemesis.ParamJitter] = "0s"
	queued := watchRules(t, "-j NFQUEUE")
	h, on, off, _ := linkFault(t, context.Background(), cfg, history.NemSlowLink, history.NemSlowLinkEnd)
	assert.True(t, queued(), "the node's rules sent the client's packets to the queue")
	ops := lockOps(h, cfg.Run.Clients, on.Value.Target, on, off)
	require.NotEmpty(t, ops, "the slowed client tried the lock meanwhile")
	slowest := time.Duration(0)
	for _, op := range ops {
		slowest = max(slowest, time.Duration(op[1].Time-op[0].Time))
	}
	assert.GreaterOrEqual(t, slowest, latency, "a lock operation over the slow link took at least its latency")
}

// flaky-link under docker with --reset-share 1 resets every connection of
// one client to the Redis node, so its lock operations fail meanwhile; a
// run cancelled (Ctrl-C) while it is on still heals it, with no error,
// and leaves no container, network or rule.
func TestDockerFlakyLinkCancelledRunHeals(t *testing.T) {
	testtier.Long(t)
	cfg := dockerConfig(t, "redis", []string{"flaky-link"}, time.Minute)
	cfg.Pause, cfg.Interval = 30*time.Second, time.Second // still on when the run is cancelled
	cfg.Run.Params[nemesis.ParamResetShare] = "1"
	flaky := watchRules(t, "-j lockcheck-flaky-")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Cancel a while after the rules went in, so that the client
		// meets them.
		deadline := time.Now().Add(time.Minute)
		for !flaky() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(2 * time.Second)
		cancel()
	}()
	h, on, off, out := linkFault(t, ctx, cfg, history.NemFlakyLink, history.NemFlakyLinkEnd)
	assert.True(t, out.Interrupted)
	assert.True(t, flaky(), "the node's rules reset the client's connections")
	failed := slices.ContainsFunc(lockOps(h, cfg.Run.Clients, on.Value.Target, on, off), func(op [2]history.Event) bool { return op[1].Type != history.OK })
	assert.True(t, failed, "a lock operation of the client failed on its reset connections")
	rules, err := containertest.Rules(context.Background(), containertest.Engine(t))
	require.NoError(t, err)
	assert.Empty(t, rules, "no container of the run is left to hold a rule")
}

// recordingCutter is a linkCutter that records what it was asked.
type recordingCutter struct{ calls *[]string }

func (r recordingCutter) Cut(addr string) error   { return r.add("cut " + addr) }
func (r recordingCutter) Uncut(addr string) error { return r.add("uncut " + addr) }
func (r recordingCutter) Slow(addr string, latency, jitter time.Duration) error {
	return r.add(fmt.Sprintf("slow %s %s %s", addr, latency, jitter))
}
func (r recordingCutter) Flaky(addr string, share float64) error {
	return r.add(fmt.Sprintf("flaky %s %g", addr, share))
}
func (r recordingCutter) ClientAddr(int) (string, error) { return "", nil }
func (r recordingCutter) add(call string) error          { *r.calls = append(*r.calls, call); return nil }

// The docker runtime shapes a link at one end, both ways: the node of a
// client's link, the first node of two; a cut is made at every node end.
// Only what changed is asked of the node, and the heal asks for zero.
func TestContainerLinksShapeAtOneEnd(t *testing.T) {
	calls := map[string]*[]string{"redis-0": {}, "redis-1": {}}
	l := &containerLinks{
		nodes:  map[string]linkCutter{"redis-0": recordingCutter{calls["redis-0"]}, "redis-1": recordingCutter{calls["redis-1"]}},
		addrs:  map[string]string{"redis-0": "10.0.0.2", "redis-1": "10.0.0.3", "c0": "10.0.0.150"},
		cut:    map[[2]string]bool{},
		shaped: map[[2]string]nemesis.LinkRule{},
	}
	slow := nemesis.LinkRule{Latency: 200 * time.Millisecond, Jitter: 50 * time.Millisecond}
	for _, step := range []struct {
		a, b string
		rule nemesis.LinkRule
	}{
		{"c0", "redis-1", slow},
		{"redis-1", "redis-0", slow},
		{"c0", "redis-1", slow}, // unchanged: nothing asked
		{"redis-1", "redis-0", nemesis.LinkRule{Reset: 0.5}},
		{"c0", "redis-1", nemesis.LinkRule{}},
		{"redis-1", "redis-0", nemesis.LinkRule{}},
		{"redis-0", "redis-1", nemesis.LinkRule{Cut: true}},
	} {
		require.NoError(t, l.shape(step.a, step.b, step.rule))
	}
	assert.Equal(t, []string{
		"slow 10.0.0.150 200ms 50ms", "slow 10.0.0.2 200ms 50ms",
		"slow 10.0.0.2 0s 0s", "flaky 10.0.0.2 0.5",
		"slow 10.0.0.150 0s 0s",
		"flaky 10.0.0.2 0",
		"cut 10.0.0.2",
	}, *calls["redis-1"])
	assert.Equal(t, []string{"cut 10.0.0.3"}, *calls["redis-0"], "redis-0 shapes nothing that redis-1 shapes")
	assert.Empty(t, l.shaped, "the heals leave nothing shaped")
}
