package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
)

// goClient builds the Go reference client, examples/clients/go:
// lockcheck's Redis recipe behind the client protocol (a module of its
// own: built in its folder).
func goClient(t *testing.T) string {
	t.Helper()
	goClientOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lockcheck-goclient-")
		if err != nil {
			goClientErr = err
			return
		}
		goClientBin = filepath.Join(dir, "goclient")
		build := exec.Command("go", "build", "-o", goClientBin, ".")
		build.Dir = filepath.Join(clientsDir, "go")
		if out, err := build.CombinedOutput(); err != nil {
			goClientErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	require.NoError(t, goClientErr)
	return goClientBin
}

var (
	goClientOnce sync.Once
	goClientBin  string
	goClientErr  error
)

// A lock client program runs like a backend: it passes without faults and
// results.json names it; a scenario stops its watchdog at the failpoint
// the program declared (the first article's demo step 4, through the
// protocol) and the renewals that stopped and the lost update show.
func TestClientProgramE2E(t *testing.T) {
	testtier.Long(t)
	bin := goClient(t)
	store := t.TempDir()
	start := time.Now()

	inv := lockcheck("run", "--client", bin, "--topology", "redis", "--nemesis", "none", "--time-limit", "2s", "--out", store)
	require.Equal(t, exitValid, inv.code, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
	res := readResults(t, filepath.Join(store, "latest"))
	require.NotNil(t, res.Config.Client)
	assert.Equal(t, "go-redis", res.Config.Client.Library)
	assert.Equal(t, []string{bin}, res.Config.Client.Command)
	assert.Equal(t, "goclient", res.Config.Backend)
	assert.FileExists(t, filepath.Join(store, "latest", results.LogsDir, "client-c0.log"))

	scn := filepath.Join(t.TempDir(), "watchdog-before-renew.yaml")
	require.NoError(t, os.WriteFile(scn, []byte(`name: client-watchdog-before-renew
title: A watchdog stopped right before it renews, with its holder
client: {command: "'`+bin+`' -watchdog", topology: redis, name: watchdog}
workload: unfenced
ttl: 300ms
clients: 2
think: 150ms
time_limit: 3s
timeline:
  - at: 300ms
    when: {client: c0, reaches: before-renew}
    do: pause
    target: c0
    for: 900ms
expect:
  verdict: "false"
  fail: [resource, double_ownership]
`), 0o644))
	t.Logf("run done after %s", time.Since(start))
	inv = lockcheck("scenario", "run", "--file", scn, "--out", store)
	t.Logf("scenario done after %s", time.Since(start))
	require.Equal(t, exitValid, inv.code, "the scenario's expectations hold: stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
	h, err := history.ReadFile(filepath.Join(store, "latest", results.HistoryFile))
	require.NoError(t, err)
	var pause, resume int64
	var renewals []history.Event
	lost := false
	for _, e := range h.Events {
		if _, ok := libraryRenewal(e); ok {
			renewals = append(renewals, e)
		}
		switch {
		case e.F == history.NemPause:
			pause = e.Time
		case e.F == history.NemResume:
			resume = e.Time
		case e.F == history.NemLockLost:
			lost = true
		}
	}
	require.NotZero(t, pause, "the scenario paused c0 at its watchdog's failpoint")
	assert.NotEmpty(t, renewals, "the library's renewals are recorded")
	for _, r := range renewals {
		if p, _ := libraryRenewal(r); p == "c0" {
			assert.False(t, r.Time > pause && r.Time < resume, "no renewal of the paused client during its pause")
		}
	}
	assert.True(t, lost, "the watchdog's failed renewal is recorded as lock-lost")
	repro, err := os.ReadFile(filepath.Join(store, "latest", "repro.yaml"))
	if err == nil {
		assert.Contains(t, string(repro), "client:", "the reproduction reruns the program")
	}
}

// A program that cannot start, or that hands out no fence to a fenced run
// asking for the lock's fences, refuses the run before it starts with one
// line; client check passes a conforming program.
func TestClientProgramRefusals(t *testing.T) {
	testtier.Long(t)
	bin := goClient(t)
	store := t.TempDir()
	inv := lockcheck("run", "--client", filepath.Join(store, "no-such-client")+" --x", "--nemesis", "none", "--time-limit", "1s", "--out", store)
	assert.Equal(t, exitUnknown, inv.code)
	assert.Contains(t, inv.stderr, "the command starts")
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(inv.stderr), "\n")+1, "one line: %s", inv.stderr)

	inv = lockcheck("run", "--client", bin+" -nofence", "--client-name", "nofence", "--workload", "fenced", "--nemesis", "none", "--time-limit", "1s", "--out", store)
	assert.Equal(t, exitUnknown, inv.code)
	assert.Contains(t, inv.stderr, "hands out no fence")
	assert.Contains(t, inv.stderr, "supports.fence", "a program is told the program's fix")
	assert.NotContains(t, inv.stderr, "lockcheck.Backend.Fences", "not the Go API's")
	nodes, _ := filepath.Glob(filepath.Join(store, "*-nofence-*", "nodes"))
	assert.Empty(t, nodes, "a run refused before it started leaves no servers' data behind")

	// A grant with no lease on a topology whose locks do not live on
	// sessions: the rule every lock is held to (workloads.LeaseError).
	inv = lockcheck("run", "--client", "/usr/bin/python3 ../../backends/program/testdata/broken.py nottl", "--client-name", "nottl", "--nemesis", "none", "--time-limit", "5s", "--out", store)
	assert.Equal(t, exitUnknown, inv.code)
	assert.Contains(t, inv.stderr, "acquire_ok ttl_ms is 0s")

	inv = lockcheck("client", "check", "--client", bin+" -watchdog", "--client-name", "checked", "--topology", "redis")
	assert.Equal(t, exitValid, inv.code, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
	assert.Contains(t, inv.stdout, "conforms")
}

func readResults(t *testing.T, dir string) *results.Results {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, results.ResultsFile))
	require.NoError(t, err)
	var res results.Results
	require.NoError(t, json.Unmarshal(raw, &res))
	return &res
}

// The shortest Python client of docs/any-language.md conforms to the
// protocol as written.
func TestReadmeClientConforms(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import redis").Run(); err != nil {
		t.Skip("Debian's python3-redis is not installed (scripts/setup)")
	}
	page, err := os.ReadFile("../../docs/any-language.md")
	require.NoError(t, err)
	section := string(page)
	start := strings.Index(section, "```python\n") + len("```python\n")
	end := start + strings.Index(section[start:], "```")
	script := filepath.Join(t.TempDir(), "my_lock.py")
	require.NoError(t, os.WriteFile(script, []byte(section[start:end]), 0o644))
	inv := lockcheck("client", "check", "--client", "/usr/bin/python3 "+script, "--client-name", "readme", "--topology", "redis")
	assert.Equal(t, exitValid, inv.code, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
}

// A library that takes a lease of its own (the Go client with -lease 3s,
// as python-etcd3 takes 60 s) is judged by the lease it was granted, not
// by --ttl: under pause-holder with the default pause (twice the 500ms
// asked) no pause outlives a lease, so the run is unknown and says whose
// lease was how long; a pause longer than the lease granted lands.
func TestPauseHolderIsJudgedByTheLeaseTheLibraryWasGranted(t *testing.T) {
	bin := goClient(t)
	inv, res, _ := runMayMiss(t, "--client", bin+" -lease 3s", "--client-name", "lease3s", "--nemesis", "pause-holder", "--ttl", "500ms", "--time-limit", "6s")
	require.Positive(t, res.FaultLanding.Injected, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
	assert.Equal(t, exitUnknown, inv.code, "stdout:\n%s", inv.stdout)
	assert.Zero(t, res.FaultLanding.Landed)
	assert.Contains(t, res.Reason, "No fault landed")
	assert.Regexp(t, `c\d's lease was 3s, the pause 1(\.\d+)?s`, res.FaultLanding.Missed)
	assert.Contains(t, inv.stdout, "leases granted: 3s, not the 500ms --ttl asked")

	inv, res, _ = runMayMiss(t, "--client", bin+" -lease 3s", "--client-name", "lease3s", "--nemesis", "pause-holder", "--ttl", "500ms", "--pause", "4s", "--time-limit", "9s")
	require.Positive(t, res.FaultLanding.Landed, "a 4s pause outlives the 3s lease: stdout:\n%s", inv.stdout)
	assert.Equal(t, exitInvalid, inv.code, "the holder's lease ran out under the pause, unfenced: stdout:\n%s", inv.stdout)
}
