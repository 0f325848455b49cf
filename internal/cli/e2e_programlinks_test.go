package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/harness/container/containertest"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
)

// A partition aimed at a lock client program cuts the program's own
// connections, as it does a built-in client's: every slot's program is
// handed relays that dial from the slot's address. c0, holding the Go
// reference client's lock with a 1s TTL and working for 2.5s, is cut from
// redis-0 for 3s: nothing c0 sends during the cut is answered (its
// release is not accepted), and c1 is granted the lock once c0's lease
// ran out. Before the relays, c0's release was accepted 0.3s into a "cut".
func TestPartitionCutsAProgramsOwnLinks(t *testing.T) {
	testtier.Long(t)
	bin := goClient(t)
	inv, h := runScenarioYAML(t, fmt.Sprintf(`name: cut-a-program
client:
  command: %s
  topology: redis
workload: unfenced
ttl: 1s
clients: 2
think: 2500ms
time_limit: 6s
timeline:
  - at: 300ms
    do: partition
    target: c0
    links: [redis-0]
    for: 3s
expect:
  verdict: "not true"
`, bin))
	var cut, healed int64
	for _, e := range h.Events {
		switch {
		case e.F == history.NemPartition:
			cut = e.Time
		case e.F == history.NemHeal && cut != 0:
			healed = e.Time
		}
	}
	require.NotZero(t, cut, "the partition ran: %s", inv.stdout)
	require.NotZero(t, healed, "and healed")
	// A reply c0 read in the cut's first moments was on its way before it.
	const inFlight = 100 * time.Millisecond
	c1Granted := false
	for _, e := range h.Events {
		// The resource is not behind the cut: c0 goes on working.
		if e.Time <= cut+int64(inFlight) || e.Time >= healed || e.Type != history.OK || e.F == "write" || e.F == "read" {
			continue
		}
		if e.Process == 0 {
			t.Errorf("c0 was answered %s into its cut: %s %+v", time.Duration(e.Time-cut), e.F, e.Value)
		}
		if e.Process == 1 && e.F == "acquire" {
			c1Granted = true
		}
	}
	assert.True(t, c1Granted, "c1 was granted the lock during c0's cut: the cut was c0's alone")
}

// A network fault that could not reach a program's connections is refused
// before anything starts, in one line that says why: Sentinel hands a
// program the master's own address, which no relay of its slot stands in
// front of.
func TestNetworkFaultsThatCannotReachAProgramAreRefused(t *testing.T) {
	store := t.TempDir()
	inv := lockcheck("run", "--client", "/bin/true", "--topology", "sentinel", "--nemesis", "partition", "--time-limit", "1s", "--out", store)
	assert.Equal(t, exitUnknown, inv.code)
	assert.Contains(t, inv.stderr, "past its slot's links")
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(inv.stderr), "\n")+1, "one line: %s", inv.stderr)
}

// The incident shape with real libraries: kazoo's holder, cut off from
// every ZooKeeper server past its one-second session through its slot's
// relays, and redis-py's, cut off from Redis past its 2 s lease, go on
// working; unfenced an update is lost (and kazoo says LOST only after the
// next grant), fenced by the resource the late write is refused
// (examples/clients/{kazoo,redis-py}/cut-off*.yaml).
func TestLibraryHolderCutOffPastItsLease(t *testing.T) {
	testtier.Long(t)
	needClientLibraries(t)
	for _, name := range []string{"kazoo/cut-off-past-its-session.yaml", "kazoo/cut-off-fenced.yaml", "redis-py/cut-off.yaml", "redis-py/cut-off-fenced.yaml"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(filepath.Join(clientsDir, name))
			require.NoError(t, err)
			// The scenario names its command from the repository's root.
			inv, h := runScenarioYAML(t, strings.ReplaceAll(string(raw), " examples/clients/", " "+clientsDir+"/"))
			require.Equal(t, exitValid, inv.code, "the scenario's expectations hold: stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
			if name != "kazoo/cut-off-past-its-session.yaml" {
				return
			}
			var token string
			var lost int64
			for _, e := range h.Events {
				switch {
				case token == "" && e.Process == 0 && e.F == history.FAcquire && e.Type == history.OK:
					token = e.Value.Token
				case lost == 0 && e.F == history.NemLockLost && e.Value != nil && e.Value.Token == token:
					lost = e.Time
				}
			}
			require.NotZero(t, lost, "kazoo said LOST for c0's grant")
			next, ok := nextGrant(h, token, 0)
			require.True(t, ok, "c1 was granted the lock")
			assert.Greater(t, lost, next, "kazoo said LOST only after the next grant")
		})
	}
}

// Under the docker runtime a program's relays dial from the slot's address
// on the run's network, which the node's packet rules cut: while c0's
// link to redis-0 is cut, no lock operation of c0's Go reference client is
// answered, and c1's are. Before, a program dialled from the host's own
// address, which no rule of c0's names.
func TestPartitionCutsAProgramsLinksInDocker(t *testing.T) {
	testtier.Long(t)
	cli := containertest.Engine(t)
	images := containertest.Images(t, cli)
	t.Cleanup(func() {
		assert.Zero(t, containertest.Leftovers(t, cli), "no container or network of any run is left")
	})
	args := []string{"--runtime", "docker"}
	for _, img := range catalog.Images() {
		args = append(args, "--"+img.Param(), images[img.Kind])
	}
	inv, h := runScenarioYAML(t, fmt.Sprintf(`name: cut-a-program-in-docker
client:
  command: %s
  topology: redis
workload: unfenced
ttl: 1s
clients: 2
think: 2500ms
time_limit: 8s
timeline:
  - at: 500ms
    do: partition
    target: c0
    links: [redis-0]
    for: 3s
expect:
  verdict: "not true"
`, goClient(t)), args...)
	var cut int64
	cuts, c1 := 0, 0
	for _, e := range h.Events {
		lockOp := e.F == history.FAcquire || e.F == history.FRelease || e.F == history.FExtend
		switch {
		case e.F == history.NemPartition:
			cut, cuts = e.Time, cuts+1
		case e.F == history.NemHeal:
			cut = 0
		case cut != 0 && e.Time > cut+int64(100*time.Millisecond) && e.Type == history.OK && lockOp && e.Process == 0:
			t.Errorf("c0 was answered %s into its cut: %s", time.Duration(e.Time-cut), e.F)
		case cut != 0 && e.Type == history.OK && lockOp && e.Process == 1:
			c1++
		}
	}
	require.Equal(t, 1, cuts, "the partition ran: %s", inv.stdout)
	assert.Positive(t, c1, "c1's link was not cut")
}

// runScenarioYAML runs the scenario yaml with scenario run's extra flags and
// reads the history of its run.
func runScenarioYAML(t *testing.T, yaml string, extra ...string) (invocation, *history.History) {
	t.Helper()
	dir := t.TempDir()
	scn := filepath.Join(dir, "scenario.yaml")
	require.NoError(t, os.WriteFile(scn, []byte(yaml), 0o644))
	store := filepath.Join(dir, "store")
	inv := lockcheck(append([]string{"scenario", "run", "--file", scn, "--out", store}, extra...)...)
	h, err := history.ReadFile(filepath.Join(store, "latest", results.HistoryFile))
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
	return inv, h
}
