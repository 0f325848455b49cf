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

	"github.com/lockcheck/lockcheck/history"
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
			require.Equal(t, NetworkProxy, networkOf(cfg), "a partition under the process runtime proxies")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.interrupt {
				go func() {
					time.Sleep(2 * time.Second) // the cut starts after 1s
					cancel()
				}()
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

			h, err := history.ReadFile(filepath.Join(out.Dir, "history.jsonl"))
			require.NoError(t, err)
			var cut, healed []string
			for _, e := range h.Events {
				switch e.F {
				case history.NemPartition:
					cut = append(cut, e.Value.Target)
					assert.Len(t, e.Value.Links, 4+4, "a redlock node is cut from the other 4 nodes and the 4 clients: %v", e.Value.Links)
				case history.NemHeal:
					healed = append(healed, e.Value.Target)
				}
			}
			require.NotEmpty(t, cut, "a node was cut off")
			assert.Equal(t, cut, healed, "every cut healed")
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
