package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/etcd"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/workloads"
)

// runEtcd runs lockcheck against a three-member etcd cluster and checks
// that no member of the run outlived it.
func runEtcd(t *testing.T, args ...string) (invocation, *resultsAndHistory) {
	t.Helper()
	return runServers(t, "etcd", membersUnder, args...)
}

// runServers runs lockcheck against backend and checks that none of the
// server processes alive lists under the run directory outlived the run.
func runServers(t *testing.T, backend string, alive func(dir string) []string, args ...string) (invocation, *resultsAndHistory) {
	t.Helper()
	inv, res, dir := runLockcheck(t, append([]string{"--backend", backend}, args...)...)
	assert.Empty(t, alive(dir), "no %s server of the run may outlive it", backend)
	h, err := history.ReadFile(filepath.Join(dir, "history.jsonl"))
	require.NoError(t, err)
	return inv, &resultsAndHistory{res.Valid, res.Checks, res.Config, h.Events}
}

type resultsAndHistory struct {
	valid  checker.Validity
	checks checker.Checks
	config history.RunConfig
	events []history.Event
}

// membersUnder lists the live etcd member processes whose node directory
// is under dir, from their command lines.
func membersUnder(dir string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []string
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "--dir" && strings.HasPrefix(args[i+1], dir) && strings.Contains(string(raw), "etcd-member") {
				out = append(out, p)
			}
		}
	}
	return out
}

// grants returns the successful acquires of a history.
func grants(events []history.Event) []history.Event {
	var out []history.Event
	for _, e := range events {
		if e.F == history.FAcquire && e.Type == history.OK {
			out = append(out, e)
		}
	}
	return out
}

func TestEtcdWithoutFaultsIsClean(t *testing.T) {
	t.Parallel()
	inv, r := runEtcd(t, "--nemesis", "none", "--ttl", "500ms", "--time-limit", "6s")
	assert.Equal(t, exitValid, inv.code, inv.stdout)
	c := r.checks
	assert.Zero(t, c.LeaseSafety.Violations)
	assert.Zero(t, c.DoubleOwnership.Windows)
	assert.Zero(t, c.Resource.LostUpdates+c.Resource.StaleWritesAccepted+c.Resource.StaleWritesRefused)
	assert.Zero(t, c.Fencing.Regressions+c.Fencing.Duplicates)
	assert.True(t, c.Fencing.Checked, "the create revision is the fence")
	assert.Equal(t, "ok", c.Linearizability.Result)
	assert.Positive(t, c.Liveness.Grants, "the lock was granted")

	// The session TTL is --ttl rounded up to whole seconds, and says so.
	assert.Equal(t, "1s (--ttl 500ms rounded up to etcd's whole seconds)", r.config.Params[etcd.ParamSessionTTL])
	assert.EqualValues(t, 500, r.config.TTLms, "the TTL asked for")
	assert.EqualValues(t, 1000, r.config.LeaseMs, "the lease etcd grants for it")
	assert.EqualValues(t, 2000, r.config.PauseMs, "the default pause outlasts the session's real lease")
	for _, g := range grants(r.events) {
		assert.EqualValues(t, 1000, g.Value.TTLms, "every grant promises the lease etcd granted")
	}
}

// A holder paused past its session's lease loses the lock while it still
// believes it holds it; unfenced, its late write is a lost update.
func TestEtcdUnfencedPausedHolderLosesUpdates(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	inv, r := runEtcd(t, "--workload", "unfenced", "--nemesis", "pause-holder", "--ttl", "1s", "--pause", "3s", "--time-limit", "12s")
	assertSessionHolderLostUpdates(t, "etcd", inv, r)
}

// assertSessionHolderLostUpdates holds an unfenced run of a session-based
// lock (etcd, ZooKeeper) under pause-holder to what it must show: lost
// updates and double ownership, no broken promise of the service, and a
// holder that noticed, after its write, that its session was gone.
func assertSessionHolderLostUpdates(t *testing.T, service string, inv invocation, r *resultsAndHistory) {
	t.Helper()
	assert.Equal(t, exitInvalid, inv.code, inv.stdout)
	assert.Equal(t, checker.Invalid, r.valid)
	assert.GreaterOrEqual(t, r.checks.Resource.LostUpdates, 1)
	assert.GreaterOrEqual(t, r.checks.DoubleOwnership.Windows, 1)
	assert.Zero(t, r.checks.LeaseSafety.Violations, "a paused client does not make %s break its promise", service)
	var noticed bool
	for _, e := range r.events {
		noticed = noticed || (e.F == history.FRelease && e.Type == history.Invoke && e.Value != nil && e.Value.Detail == workloads.LeaseLost)
	}
	assert.True(t, noticed, "a paused holder notices its session is gone, after its write")
}

// The same pause, fenced: the resource refuses the paused holder's write,
// whether the fence is the lock key's create revision or the resource's own
// sequence.
func TestEtcdFencedPausedHolderIsRefused(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	for _, source := range []string{workloads.FenceFromLock, workloads.FenceFromResource} {
		t.Run(source, func(t *testing.T) {
			t.Parallel()
			inv, r := runEtcd(t, "--workload", "fenced", "--fence-source", source, "--nemesis", "pause-holder", "--ttl", "1s", "--pause", "3s", "--time-limit", "12s")
			assert.Equal(t, exitValid, inv.code, inv.stdout)
			c := r.checks.Resource
			assert.GreaterOrEqual(t, c.StaleWritesRefused, 1)
			assert.Zero(t, c.LostUpdates)
			assert.Zero(t, c.StaleWritesAccepted)
		})
	}
}

// Stopping the leader and killing members: the run completes, clients get
// the lock again afterwards, and etcd keeps its lease promise.
func TestEtcdSurvivesLeaderPausesAndMemberRestarts(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	inv, r := runEtcd(t, "--workload", "fenced", "--nemesis", "pause-leader,kill-restart", "--ttl", "1s", "--time-limit", "10s")
	assert.Equal(t, exitValid, inv.code, inv.stdout)
	assert.Zero(t, r.checks.LeaseSafety.Violations)
	var firstFault int64
	var leaders int
	for _, e := range r.events {
		if e.Process != history.Nemesis || e.Value == nil {
			continue
		}
		if (e.F == history.NemPause || e.F == history.NemKill) && firstFault == 0 {
			firstFault = e.Time
			assert.True(t, strings.HasPrefix(e.Value.Target, "etcd-"), "faults hit members: %+v", e)
		}
		if e.F == history.NemRole && strings.HasPrefix(e.Value.Detail, "leader") {
			leaders++
		}
	}
	require.NotZero(t, firstFault, "a fault was injected")
	assert.GreaterOrEqual(t, leaders, 2, "the history shows the leader changing")
	var after int
	for _, g := range grants(r.events) {
		if g.Time > firstFault {
			after++
		}
	}
	assert.Positive(t, after, "clients got the lock again after the faults")
}

func TestEtcdBadInputIsOneLineAndExitTwo(t *testing.T) {
	store := t.TempDir()
	tests := []badInput{
		{"pause-leader without a leader", []string{"run", "--out", store, "--nemesis", "pause-leader"}, "--nemesis pause-leader needs a service that names its leader; backend redis under --runtime process has none (backends that have it: etcd, sentinel, zookeeper)"},
		{"election too short", []string{"run", "--out", store, "--backend", "etcd", "--etcd-election", "300ms"}, "--etcd-election 300ms must be at least 5 times --etcd-heartbeat 100ms"},
		{"heartbeat not whole milliseconds", []string{"run", "--out", store, "--backend", "etcd", "--etcd-heartbeat", "1500us"}, "--etcd-heartbeat"},
	}
	assertRefused(t, store, nil, tests)
}
