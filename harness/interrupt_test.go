package harness

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	dockerclient "github.com/moby/moby/client"

	"github.com/lockcheck/lockcheck/backends/redis"
	"github.com/lockcheck/lockcheck/harness/container"
	"github.com/lockcheck/lockcheck/harness/container/containertest"
	"github.com/lockcheck/lockcheck/internal/testtier"
)

// Ctrl-C while the lock service starts is reported as that, naming what
// was starting, never as a node that failed to answer; nothing is left.
func TestInterruptDuringStartUp(t *testing.T) {
	testtier.Long(t)
	requireRedis(t)
	if _, err := os.Stat("/usr/bin/redis-sentinel"); err != nil {
		t.Fatalf("redis-sentinel is not installed (run scripts/setup): %v", err)
	}
	for _, tt := range []struct {
		name    string
		backend string
		// cancelEarly cancels the run before it starts, else once a node runs.
		cancelEarly bool
		want        string
	}{
		{"cancelled before the first node answered", "redis", true, "interrupted while starting redis-0"},
		{"cancelled while the sentinels start", "sentinel", false, "interrupted while starting "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, "", "fenced", nil, time.Minute)
			cfg.Run.Backend = tt.backend
			cfg.Run.Variant = redis.Correct
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancelEarly {
				cancel()
			} else {
				go func() {
					deadline := time.Now().Add(30 * time.Second)
					for len(childrenOf(os.Getpid())) == 0 && time.Now().Before(deadline) {
						time.Sleep(time.Millisecond)
					}
					cancel()
				}()
			}
			_, err := Run(ctx, cfg)
			var si *StartInterrupted
			require.ErrorAs(t, err, &si)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "did not answer")
			assert.Empty(t, childrenOf(os.Getpid()), "no server outlives an interrupted start")
		})
	}
}

// Under the docker runtime, Ctrl-C while the containers are created or
// started is one error naming the nodes, and no container is left, not
// even one whose creation the interruption cut off.
func TestDockerInterruptDuringStartUp(t *testing.T) {
	testtier.Long(t)
	cfg := dockerConfig(t, "sentinel", nil, time.Minute)
	cli := containertest.Engine(t)
	owner, err := container.Owner()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Cancel once the engine holds a container of this run.
		filter := dockerclient.Filters{}.Add("label", container.LabelOwner+"="+owner)
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			cs, err := cli.ContainerList(context.Background(), dockerclient.ContainerListOptions{All: true, Filters: filter})
			if err == nil && len(cs.Items) > 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	_, err = Run(ctx, cfg)
	var si *StartInterrupted
	require.ErrorAs(t, err, &si)
	assert.Regexp(t, `^interrupted while starting [a-z0-9, -]+$`, err.Error())
}
