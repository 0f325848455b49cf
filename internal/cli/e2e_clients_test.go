package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
	"github.com/lockcheck/lockcheck/workloads"
)

// The reference lock clients of examples/clients, each a program in the
// language of its library, tested through the client protocol against the
// servers lockcheck starts: each conforms (client check) and is clean
// without faults, and the watchdog and kazoo clients fail the way their
// READMEs say under a paused holder.

// clientsDir is absolute: a client program is registered by its command,
// and the scenario's (its paths made absolute) must be the same command.
var clientsDir, _ = filepath.Abs(filepath.Join("..", "..", "examples", "clients"))

// referenceClient is one program of examples/clients.
type referenceClient struct {
	name, topology, library string
	command                 string
	// checkArgs are client check's flags beyond the client's: a ZooKeeper
	// session longer than the check's 300 ms, which a busy machine can let
	// expire between two pings.
	checkArgs []string
}

// referenceClients are the reference clients, with the Go one built; a
// missing library fails the test with the command that installs it.
func referenceClients(t *testing.T) []referenceClient {
	t.Helper()
	needClientLibraries(t)
	bin := goClient(t)
	py := func(script string) string { return "/usr/bin/python3 " + filepath.Join(clientsDir, script) }
	return []referenceClient{
		{name: "redis-py-plain", topology: "redis", library: "redis-py", command: py("redis-py/plain.py")},
		{name: "redis-py-watchdog", topology: "redis", library: "redis-py+watchdog", command: py("redis-py/watchdog.py")},
		{name: "kazoo", topology: "zookeeper", library: "kazoo", command: py("kazoo/lock.py"), checkArgs: []string{"--ttl", "1s"}},
		{name: "perl-redis", topology: "redis", library: "Redis.pm", command: "perl " + filepath.Join(clientsDir, "perl", "lock.pl")},
		{name: "go-redis", topology: "redis", library: "go-redis", command: bin},
	}
}

// needClientLibraries fails the test, with the command that installs
// them, if the clients' libraries are missing.
func needClientLibraries(t *testing.T) {
	t.Helper()
	for _, need := range [][]string{
		{"/usr/bin/python3", "-c", "import redis, kazoo"},
		{"perl", "-MRedis", "-MJSON::PP", "-e", "1"},
	} {
		if out, err := exec.Command(need[0], need[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s(run scripts/setup: it installs python3-redis, python3-kazoo and libredis-perl)", strings.Join(need, " "), err, out)
		}
	}
}

func (c referenceClient) args(more ...string) []string {
	return append([]string{"--client", c.command, "--client-name", c.name, "--topology", c.topology}, more...)
}

func TestReferenceClientsConformAndAreCleanWithoutFaults(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	for _, c := range referenceClients(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			check := lockcheck(append([]string{"client", "check"}, c.args(c.checkArgs...)...)...)
			assert.Equal(t, exitValid, check.code, "client check:\n%s%s", check.stdout, check.stderr)

			inv, res, _ := runLockcheck(t, c.args("--nemesis", "none", "--ttl", "1s", "--time-limit", "2s")...)
			assert.Equal(t, exitValid, inv.code, inv.stdout)
			assert.Equal(t, checker.Valid, res.Valid, res.Reason)
			assert.Positive(t, res.Checks.Liveness.Grants)
			require.NotNil(t, res.Config.Client, "results.json names the client")
			assert.Equal(t, c.library, res.Config.Client.Library)
		})
	}
}

// The watchdog renews every TTL/3 from a thread of the client's process, so
// a pause of the holder stops it too (the first article's "a watchdog does
// not survive a GC pause"): unfenced, two clients own the lock while the
// paused holder's renewals have stopped; fenced by the resource's
// sequence, the stale writes are refused.
func TestWatchdogClientDoesNotSurviveAPause(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	watchdog := "/usr/bin/python3 " + filepath.Join(clientsDir, "redis-py", "watchdog.py")
	args := []string{"--client", watchdog, "--client-name", "redis-py-watchdog", "--topology", "redis", "--nemesis", "pause-holder", "--ttl", "300ms", "--time-limit", "3s"}

	t.Run("unfenced", func(t *testing.T) {
		t.Parallel()
		// A hold of 200 ms outlasts TTL/3, so the watchdog renews in every
		// hold it is not paused in.
		inv, res, dir, landed := runFault(t, append(args, "--workload", "unfenced", "--think", "200ms")...)
		if !landed {
			return
		}
		assert.Equal(t, exitInvalid, inv.code, inv.stdout)
		assert.GreaterOrEqual(t, res.Checks.DoubleOwnership.Windows, 1, res.Reason)
		h, err := history.ReadFile(filepath.Join(dir, results.HistoryFile))
		require.NoError(t, err)
		assert.Positive(t, renewals(h, "", 0, h.Events[len(h.Events)-1].Time+1), "the watchdog renews the holds nobody pauses")
		pauses := heldPauses(h)
		require.NotEmpty(t, pauses)
		for _, p := range pauses {
			// A running watchdog renews pause/(TTL/3) times; a paused one
			// none (a renewal sent just before the stop is read as the
			// holder goes on, and recorded from when it was sent).
			assert.LessOrEqual(t, renewals(h, p.token, p.pause, p.resume), 1, "%s renewed while it was paused", p.target)
		}
	})
	t.Run("fenced", func(t *testing.T) {
		t.Parallel()
		inv, res, _, landed := runFault(t, append(args, "--workload", "fenced", "--fence-source", "resource")...)
		if !landed {
			return
		}
		assert.Equal(t, exitValid, inv.code, inv.stdout)
		c := res.Checks.Resource
		assert.GreaterOrEqual(t, c.StaleWritesRefused, 1)
		assert.Zero(t, c.LostUpdates+c.StaleWritesAccepted)
	})
}

// kazoo's lock lives as long as its ZooKeeper session: a holder paused past
// the session timeout loses it, the next client is granted the lock, and
// kazoo's connection listener says LOST only once the holder runs again.
func TestKazooClientLearnsOfItsExpiredSessionLate(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	kazoo := "/usr/bin/python3 " + filepath.Join(clientsDir, "kazoo", "lock.py")
	inv, res, dir, landed := runFault(t, "--client", kazoo, "--client-name", "kazoo", "--topology", "zookeeper", "--workload", "unfenced",
		"--nemesis", "pause-holder", "--ttl", "1s", "--pause", "2s", "--nemesis-interval", "1s", "--time-limit", "5s")
	if !landed {
		return
	}
	assert.Equal(t, exitInvalid, inv.code, inv.stdout)
	assert.GreaterOrEqual(t, res.Checks.DoubleOwnership.Windows, 1, res.Reason)
	assert.Zero(t, res.Checks.LeaseSafety.Violations, "ZooKeeper kept its promise: the session had expired")
	h, err := history.ReadFile(filepath.Join(dir, results.HistoryFile))
	require.NoError(t, err)
	told := 0
	for _, p := range heldPauses(h) {
		if p.lost == 0 {
			continue // the run ended before kazoo reconnected
		}
		told++
		next, ok := nextGrant(h, p.token, p.pause)
		require.True(t, ok, "another client was granted the lock while %s was paused", p.target)
		assert.Greater(t, p.lost, next, "%s: kazoo said LOST after the next grant", p.target)
	}
	assert.Positive(t, told, "kazoo reports a paused holder's expired session as a lost lock")
}

// pause is a pause of a client that held the lock, with the lock-lost
// event of its grant that followed, if any.
type pause struct {
	target, token       string
	pause, resume, lost int64
}

// heldPauses returns the pauses of the run that stopped a client holding
// the lock (the only key), each with the token it held and the first
// lock-lost of that token. Slot cN runs as processes N, N+clients, ...
func heldPauses(h *history.History) []pause {
	var out []pause
	open := map[string]int{}       // target -> its pause in out, until resumed
	holding := map[string]string{} // slot -> the token it holds
	slot := func(p history.Process) string { return fmt.Sprintf("c%d", int(p)%h.Header.Config.Clients) }
	for _, e := range h.Events {
		switch {
		case e.Process != history.Nemesis:
			if e.F == history.FAcquire && e.Type == history.OK && e.Value != nil {
				holding[slot(e.Process)] = e.Value.Token
			}
			if e.F == history.FRelease && e.Type == history.Invoke {
				delete(holding, slot(e.Process))
			}
		case e.Value == nil:
		case e.F == history.NemPause:
			if token, ok := holding[e.Value.Target]; ok {
				open[e.Value.Target] = len(out)
				out = append(out, pause{target: e.Value.Target, token: token, pause: e.Time})
			}
		case e.F == history.NemResume:
			if i, ok := open[e.Value.Target]; ok {
				out[i].resume = e.Time
				delete(open, e.Value.Target)
			}
		case e.F == history.NemLockLost:
			for i := range out {
				if out[i].token == e.Value.Token && out[i].lost == 0 {
					out[i].lost = e.Time
				}
			}
		}
	}
	return out
}

// renewals counts the library's renewals of token ("" any) recorded in
// (from, to).
func renewals(h *history.History, token string, from, to int64) int {
	n := 0
	for _, e := range h.Events {
		if _, ok := libraryRenewal(e); ok && (token == "" || e.Value.Token == token) && e.Time > from && e.Time < to {
			n++
		}
	}
	return n
}

// libraryRenewal says whether e records a renewal the library made on its
// own, as an extend (invoked when it was sent) or as a lock-renewed
// observation, and of which client process.
func libraryRenewal(e history.Event) (string, bool) {
	switch {
	case e.Value == nil:
		return "", false
	case e.F == history.FExtend && e.Type == history.Invoke && e.Value.Detail == workloads.RenewedByLibrary:
		return e.Process.String(), true
	case e.F == history.NemLockRenewed:
		return e.Value.Target, true
	}
	return "", false
}

// nextGrant is the time of the first grant after from of another token
// than token.
func nextGrant(h *history.History, token string, from int64) (int64, bool) {
	for _, e := range h.Events {
		if e.F == history.FAcquire && e.Type == history.OK && e.Time > from && e.Value != nil && e.Value.Token != token {
			return e.Time, true
		}
	}
	return 0, false
}

// The first article's demo step 4 through the protocol, with the real
// library: examples/clients/redis-py/watchdog-gc-pause.yaml stops the
// watchdog client at its declared failpoint before-renew; its
// expectations (an update lost, the lease honoured by Redis) hold, and the
// library says the lock is lost only after the next grant.
func TestWatchdogClientScenarioReproducesDemoStep4(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	needClientLibraries(t)
	file := filepath.Join(clientsDir, "redis-py", "watchdog-gc-pause.yaml")
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	// The scenario names its command from the repository's root; the test
	// runs in internal/cli.
	scn := filepath.Join(t.TempDir(), filepath.Base(file))
	require.NoError(t, os.WriteFile(scn, []byte(strings.ReplaceAll(string(raw), " examples/clients/", " "+clientsDir+"/")), 0o644))
	store := t.TempDir()
	inv := lockcheck("scenario", "run", "--file", scn, "--out", store)
	require.Equal(t, exitValid, inv.code, "the scenario's expectations hold: stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
	h, err := history.ReadFile(filepath.Join(store, "latest", results.HistoryFile))
	require.NoError(t, err)
	pauses := heldPauses(h)
	require.Len(t, pauses, 1, "c0 was stopped holding the lock")
	p := pauses[0]
	assert.Zero(t, renewals(h, p.token, p.pause, p.resume), "the watchdog stopped before its renewal renews nothing while paused")
	if p.lost != 0 { // the holder may release before its watchdog tries again
		next, ok := nextGrant(h, p.token, p.pause)
		require.True(t, ok)
		assert.Greater(t, p.lost, next, "the library says lost after the next grant")
	}
}
