package harness

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/redis"
	"github.com/lockcheck/lockcheck/history"
)

// Runs on a Cluster (a soak's segments) share its nodes: the node a run's
// fault paused is healed when the run ends and serves the next run, the
// same process; Close removes it.
func TestRunsShareAKeptUpCluster(t *testing.T) {
	requireRedis(t)
	cfg := testConfig(t, redis.Correct, "unfenced", []string{"pause-node"}, 3*time.Second)
	cfg.Pause, cfg.Interval = 2*time.Second, time.Second // still paused when the run ends
	require.True(t, KeepsCluster(cfg))
	c, err := StartCluster(context.Background(), cfg, filepath.Join(cfg.Out, "nodes"))
	require.NoError(t, err)
	closed := false
	defer func() {
		if !closed {
			c.Close()
		}
	}()
	cfg.Cluster = c
	pid := c.top.servers[0].PID()

	var paused bool
	for run := 1; run <= 2; run++ {
		out, err := Run(context.Background(), cfg)
		require.NoError(t, err, "run %d", run)
		assert.Equal(t, pid, c.top.servers[0].PID(), "run %d: the same server", run)
		assert.NotEqual(t, "T", processState(pid), "run %d: the paused node is healed", run)
		h, err := history.ReadFile(filepath.Join(out.Dir, "history.jsonl"))
		require.NoError(t, err)
		granted := false
		for _, e := range h.Events {
			paused = paused || e.F == history.NemPause
			granted = granted || (e.F == history.FAcquire && e.Type == history.OK)
		}
		assert.True(t, granted, "run %d: the kept-up node serves", run)
	}
	assert.True(t, paused, "a fault paused the node")
	c.Close()
	closed = true
	assert.Equal(t, "gone", processState(pid), "Close removes the nodes")
	assert.Empty(t, childrenOf(os.Getpid()), "no server or worker outlives the cluster")
}
