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

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
)

// sockets lists the sockets this process holds open.
func sockets(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			out = append(out, target)
		}
	}
	return out
}

// A run through the proxies, cut short by Ctrl-C while a node is cut off
// or at its time limit, heals the cut, records it, and leaves no proxy,
// listener or connection of its network open, and no process.
func TestProxiedRunLeavesNoListener(t *testing.T) {
	testtier.Long(t)
	requireRedis(t)
	for _, tt := range []struct {
		name      string
		interrupt bool
	}{
		{"at the time limit", false},
		{"interrupted during the cut", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := sockets(t)
			cfg := testConfig(t, "correct", "unfenced", []string{"partition"}, 4*time.Second)
			cfg.Run.Backend = "redlock"
			cfg.TTL = time.Second
			cfg.Pause, cfg.Interval = 2*time.Second, time.Second
			if tt.interrupt {
				cfg.Limit, cfg.Pause = time.Minute, 30*time.Second
			}
			require.Equal(t, NetworkProxy, networkOf(cfg, nodeSpecs(cfg, mustBackend(t, cfg))), "a partition under the process runtime proxies")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.interrupt {
				// Ctrl-C once the cut has started, however long this
				// machine takes to start five nodes.
				cfg.OnProgress = func(p Progress) {
					if p.Faults > 0 {
						cancel()
					}
				}
			}
			out, err := Run(ctx, cfg)
			require.NoError(t, err)
			assert.Equal(t, tt.interrupt, out.Interrupted)
			assert.Empty(t, childrenOf(os.Getpid()), "no server or worker outlives the run")
			// Closed sockets leave the table as their closes finish.
			deadline := time.Now().Add(5 * time.Second)
			for len(leftOver(before, sockets(t))) > 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			assert.Empty(t, leftOver(before, sockets(t)), "no proxy, listener or connection is left")

			// A redlock node is cut from the other 4 nodes and the 4
			// clients. A cut the interruption cut short landed only if it
			// held a lease first, and then says so.
			cut, landings := requireCutsHealed(t, out.Dir, 4+4)
			assert.NotEmpty(t, cut, "a node was cut off")
			if !tt.interrupt {
				assert.True(t, anyLanded(landings), "a step landed")
			}
			for _, l := range landings {
				if tt.interrupt && *l.Landed {
					assert.Contains(t, l.Detail, "cut short by the end of the run", "an interrupted cut lands only as cut short")
				}
			}
		})
	}
}

func leftOver(before, after []string) []string {
	var out []string
	for _, s := range after {
		if !slices.Contains(before, s) {
			out = append(out, s)
		}
	}
	return out
}

func mustBackend(t *testing.T, cfg Config) catalog.Backend {
	t.Helper()
	b, _, err := catalog.Lookup(cfg.Run.Backend, "")
	require.NoError(t, err)
	return b
}

// The network a run gets: proxies when a fault needs links or the user
// asks for them, for nodes that can run behind them; direct otherwise.
func TestNetworkOf(t *testing.T) {
	for _, tt := range []struct {
		backend, network string
		faults           []string
		want             string
	}{
		{backend: "sentinel", faults: []string{"partition-minority"}, want: NetworkProxy},
		{backend: "etcd", faults: []string{"pause-node"}, want: NetworkDirect},
		{backend: "redlock", network: NetworkProxy, want: NetworkProxy},
		{backend: "sentinel", network: NetworkDirect, faults: []string{"partition"}, want: NetworkDirect},
		{backend: "zookeeper", faults: []string{"partition"}, want: NetworkProxy},
	} {
		t.Run(tt.backend+" "+tt.network+" "+strings.Join(tt.faults, ","), func(t *testing.T) {
			cfg := testConfig(t, "", "unfenced", tt.faults, time.Second)
			cfg.Run.Backend = tt.backend
			cfg.Run.Params = map[string]string{}
			if tt.network != "" {
				cfg.Run.Params[ParamNetwork] = tt.network
			}
			specs := nodeSpecs(cfg, mustBackend(t, cfg))
			assert.Equal(t, tt.want, networkOf(cfg, specs))
			assert.NoError(t, checkNetwork(cfg, specs))
		})
	}
}

// Nodes that cannot run behind the proxies (a backend of a user's own that
// did not say they can) are reached directly, and --network proxy is
// refused for them.
func TestNetworkOfNodesNotProxyable(t *testing.T) {
	cfg := testConfig(t, "", "unfenced", []string{"partition"}, time.Second)
	specs := []backends.NodeSpec{{Name: "mine-0"}}
	assert.Equal(t, NetworkDirect, networkOf(cfg, specs))
	cfg.Run.Params = map[string]string{ParamNetwork: NetworkProxy}
	assert.ErrorContains(t, checkNetwork(cfg, specs), "cannot run behind lockcheck's proxies")
}

// Under the docker runtime partition-minority cuts single links with rules
// in the nodes' network namespaces and the clients' own addresses: a
// Redlock node and a client on one side, the rest on the other. The rules
// go with the containers, the addresses with the run's network.
func TestDockerPartitionMinorityCutsLinks(t *testing.T) {
	testtier.Long(t)
	cfg := dockerConfig(t, "redlock", []string{"partition-minority"}, 5*time.Second)
	cfg.TTL = time.Second
	cfg.Pause, cfg.Interval = 2*time.Second, time.Second
	out, err := Run(context.Background(), cfg)
	require.NoError(t, err)
	cut, landings := requireCutsHealed(t, out.Dir, 4+3) // cut from the 4 other nodes and the 3 other clients
	assert.True(t, anyLanded(landings), "a step landed")
	assert.Zero(t, len(cut)%2, "each step cut a node and a client (a minority of 4) off together: %v", cut)
}

// requireCutsHealed reads a run's partitions: each names links others it
// was cut from, and every cut healed. It returns the targets cut and the
// steps' landings.
func requireCutsHealed(t *testing.T, dir string, links int) (cut []string, landings []history.Value) {
	t.Helper()
	h, err := history.ReadFile(filepath.Join(dir, "history.jsonl"))
	require.NoError(t, err)
	var healed []string
	for _, e := range h.Events {
		switch e.F {
		case history.NemPartition:
			cut = append(cut, e.Value.Target)
			assert.Len(t, e.Value.Links, links, "%s was cut from %v", e.Value.Target, e.Value.Links)
		case history.NemHeal:
			healed = append(healed, e.Value.Target)
		case history.NemLanding:
			landings = append(landings, *e.Value)
		}
	}
	require.NotEmpty(t, cut)
	assert.Equal(t, cut, healed, "every cut healed")
	return cut, landings
}

// anyLanded says whether some step landed.
func anyLanded(landings []history.Value) bool {
	return slices.ContainsFunc(landings, func(v history.Value) bool { return *v.Landed })
}
