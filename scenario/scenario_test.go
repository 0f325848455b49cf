package scenario

import (
	"context"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/catalog"
	_ "github.com/lockcheck/lockcheck/backends/catalog/withetcd" // the etcd backend
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/nemesis"
)

// Scenarios run the harness, which starts workers and lockcheck-run nodes by
// running its own executable: in tests that is the test binary, which
// becomes one here.
func TestMain(m *testing.M) {
	if harness.RunWorkerFromEnv() || catalog.RunNodeFromEnv() {
		return
	}
	os.Exit(m.Run())
}

const demo4 = `name: my-incident
backend: redis
variant: correct
workload: unfenced
ttl: 300ms
clients: 2
time_limit: 3s
timeline:
  - at: 500ms
    when: {client: c0, reaches: before-write}
    do: pause
    target: c0
    for: 900ms
expect:
  verdict: false
  fail: [resource]
  counts:
    resource.lost_updates: ">= 1"
`

func TestParseReadsAScenario(t *testing.T) {
	f, err := Parse("incident.yaml", []byte(demo4))
	require.NoError(t, err)
	assert.Equal(t, "my-incident", f.Name)
	assert.Equal(t, "false", f.Expect.Verdict, "an unquoted false is read as the verdict false")
	acts := f.Actions()
	require.Len(t, acts, 1)
	assert.Equal(t, "pause", acts[0].Do)
	assert.Equal(t, "c0", acts[0].When.Client)
}

// A partition step cuts the links it names from its target for a while.
func TestParseReadsAPartition(t *testing.T) {
	f, err := Parse("incident.yaml", []byte(replaceOnce(t, demo4, "do: pause", "do: partition\n    links: [redis-0, c1]")))
	require.NoError(t, err)
	acts := f.Actions()
	require.Len(t, acts, 1)
	assert.Equal(t, nemesis.Action{At: 500 * time.Millisecond, When: acts[0].When, Do: "partition", Target: "c0", For: 900 * time.Millisecond, Links: []string{"redis-0", "c1"}}, acts[0])
}

func TestParseErrorsNameTheLineAndField(t *testing.T) {
	tests := []struct {
		name, from, to, want string
	}{
		{"misspelled field", "ttl: 300ms", "tll: 300ms", "line 5: field tll not found"},
		{"unknown node", "target: c0", "target: redis-9", `line 12: target: unknown node or client "redis-9"`},
		{"unknown client in when", "{client: c0,", "{client: c7,", `line 10: when: unknown client "c7"`},
		{"unknown moment", "reaches: before-write", "reaches: lunch", `line 10: when: unknown moment "lunch"`},
		{"unknown action", "do: pause", "do: explode", `line 11: do: unknown action "explode"`},
		{"bad duration", "for: 900ms", "for: soon", `line 13: for: "soon" is not a duration such as 900ms or +2s`},
		{"list for a duration", "ttl: 300ms", "ttl: [1,2]", `line 5: ttl: expected a duration such as 900ms or +2s, got a list`},
		{"negative ttl", "ttl: 300ms", "ttl: -500ms", `line 5: ttl: expected a positive duration such as 500ms, got -500ms`},
		{"negative time limit", "time_limit: 3s", "time_limit: -4s", `line 7: time_limit: expected a positive duration such as 5s, got -4s`},
		{"negative clients", "clients: 2", "clients: -2", `line 6: clients: expected at least 1 client, got -2`},
		{"clients not a number", "clients: 2", "clients: many", `line 6: clients: expected a whole number, got "many"`},
		{"negative at", "at: 500ms", "at: -500ms", `line 9: at: expected a time since the workload started, 0 or later, got -500ms`},
		{"at after the end", "at: 500ms", "at: 3s", `line 9: at: 3s is not before time_limit 3s: the step would never run`},
		{"negative for", "for: 900ms", "for: -1s", `line 13: for: expected a positive duration`},
		{"misspelled count", "resource.lost_updates:", "resource.lost_updatez:", `line 18: counts: "resource.lost_updatez" is no number of results.json (choose one of: resource.lost_updates, `},
		{"count of no check", "resource.lost_updates:", "vibes.level:", `line 18: counts: "vibes.level" names no check of results.json`},
		{"watchdog not a bool", "clients: 2", "watchdog: maybe", `line 6: watchdog: expected true or false, got "maybe"`},
		{"when not a mapping", "when: {client: c0, reaches: before-write}", "when: c0", `line 10: when: expected a mapping such as {client: c0, reaches: before-write}, got "c0"`},
		{"fail not a list", "fail: [resource]", "fail: {resource: 1}", "line 16: fail: expected a list such as [resource, fencing], got a mapping"},
		{"unknown backend", "backend: redis", "backend: consul", `line 2: backend: unknown backend "consul"`},
		{"unknown check", "fail: [resource]", "fail: [vibes]", `unknown check "vibes"`},
		{"partition of an unknown link", "do: pause\n    target: c0", "do: partition\n    links: [c1, c9]\n    target: c0", `line 12: links: unknown node or client "c9"`},
		{"partition cut from itself", "do: pause\n    target: c0", "do: partition\n    links: [c0]\n    target: c0", `line 12: links: "c0" is the partition's own target`},
		{"partition with no links", "do: pause", "do: partition", `line 11: do: a partition needs links`},
		{"partition with no duration", "do: pause\n    target: c0\n    for: 900ms", "do: partition\n    target: c0\n    links: [c1]", `line 11: do: a partition needs for`},
		{"links on a pause", "for: 900ms", "for: 900ms\n    links: [c1]", `line 14: links: only a partition cuts links`},
		{"any client at a failpoint", "{client: c0,", "{client: any,", `line 10: when: client "any": only bare-majority and failover-grant wait for any client`},
		{"landed no condition", "fail: [resource]", "fail: [resource]\n  landed: some", `line 17: landed: "some" is not a condition such as ">= 1"`},
		{"misspelled param", "clients: 2", "clients: 2\nparams:\n  pool-mod: transaction", `line 8: pool-mod: unknown param "pool-mod"; did you mean "pool-mode"?`},
		{"param of another topology", "clients: 2", "clients: 2\nparams:\n  pool-size: \"3\"", `params: --pool-size applies to the postgres topology only, and this run's is redis`},
		{"param of the topology, bad", "backend: redis\nvariant: correct", "backend: postgres\nparams:\n  pooler: pgbouncer\n  pool-mode: statement", `params: --pool-mode "statement": choose session or transaction`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(replaceOnce(t, demo4, tt.from, tt.to))
			_, err := Parse("incident.yaml", data)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "incident.yaml: ")
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// An empty file, or one that is no mapping, says what a scenario is.
func TestParseRefusesAFileThatIsNoScenario(t *testing.T) {
	for _, tt := range []struct{ name, data, want string }{
		{"empty", "", "incident.yaml: the file is empty: a scenario is a YAML mapping"},
		{"only a comment", "# nothing yet\n", "incident.yaml: the file is empty"},
		{"a list", "- a\n- b\n", "incident.yaml: line 1: expected a mapping with name, backend, timeline and expect, got a list"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("incident.yaml", []byte(tt.data))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "EOF")
		})
	}
}

func replaceOnce(t *testing.T, s, from, to string) string {
	t.Helper()
	i := strings.Index(s, from)
	require.GreaterOrEqual(t, i, 0, "fixture lacks %q", from)
	return s[:i] + to + s[i+len(from):]
}

// A program with every backend has every shipped scenario in its catalogue:
// only a backend the program left out skips a file, never a misspelled one.
func TestCatalogueHasEveryShippedFile(t *testing.T) {
	entries, err := fs.ReadDir(shipped, "catalog")
	require.NoError(t, err)
	all, err := Catalogue()
	require.NoError(t, err)
	assert.Len(t, all, len(entries))
}

// The catalogue is lockcheck's regression suite: every shipped scenario
// runs against real servers and must show what it expects.
func TestCatalogue(t *testing.T) {
	testtier.Long(t)
	all, err := Catalogue()
	require.NoError(t, err)
	require.NotEmpty(t, all)
	out := t.TempDir()
	for _, f := range all {
		t.Run(f.Name, func(t *testing.T) {
			if _, err := f.Plan(out, catalog.Programs{}, nil); err != nil {
				t.Fatalf("cannot run %s here: %v (run scripts/setup)", f.Name, err)
			}
			o, err := Run(context.Background(), f, out, catalog.Programs{}, nil)
			require.NoError(t, err)
			for _, m := range o.Comparison.Mismatches {
				t.Errorf("%s: expected %s, observed %s (run directory %s)", m.What, m.Expected, m.Observed, o.Dir)
			}
			assert.NotEmpty(t, o.Comparison.Lines, "a scenario that expects nothing tests nothing")
		})
	}
}

// A timeline step that never ran makes the scenario a mismatch, naming
// the step and its line.
func TestStepsThatNeverRanAreMismatches(t *testing.T) {
	f, err := Parse("incident.yaml", []byte(demo4))
	require.NoError(t, err)
	var c Comparison
	f.stepsNotRun(&c, []int{0})
	require.Len(t, c.Mismatches, 1)
	assert.False(t, c.OK())
	assert.Equal(t, Mismatch{What: "timeline step 1 (pause c0, line 9)", Expected: "runs", Observed: "never ran: the run ended first"}, c.Mismatches[0])
}

// On real servers: c0 is paused for good, so the step waiting for c0 to
// reach before-write never runs, and the scenario says so.
func TestAStepThatNeverRanIsReported(t *testing.T) {
	const never = `name: never-reached
backend: redis
variant: correct
workload: fenced
ttl: 300ms
clients: 2
time_limit: 2s
timeline:
  - at: 200ms
    do: pause
    target: c0
  - at: 500ms
    when: {client: c0, reaches: before-write}
    do: pause
    target: c1
expect:
  hold: [lease_safety]
`
	f, err := Parse("never.yaml", []byte(never))
	require.NoError(t, err)
	o, err := Run(context.Background(), f, t.TempDir(), catalog.Programs{}, nil)
	require.NoError(t, err)
	// The step is reported either as a step that never ran or as a step
	// whose landing says it never reached its moment.
	reported := false
	for _, m := range o.Comparison.Mismatches {
		reported = reported || m.What == "timeline step 2 (pause c1, line 12)" ||
			strings.Contains(m.Observed, "the run ended before c0 reached before-write")
	}
	assert.True(t, reported, "%+v", o.Comparison.Mismatches)
}

// A scenario reads each check's own status: fails means failed, holds
// means ok; a notice (a fenced overlap) is neither, and an orphaned lock
// fails liveness.
func TestCompareReadsTheChecksStatus(t *testing.T) {
	f, err := Parse("incident.yaml", []byte(replaceOnce(t, demo4, "workload: unfenced", "workload: fenced")))
	require.NoError(t, err)
	f.Expect = Expect{Fail: []string{"double_ownership"}, Hold: []string{"lease_safety", "liveness"}}
	res := &checker.Result{Checks: checker.Checks{
		LeaseSafety:     checker.LeaseSafety{Valid: true},
		DoubleOwnership: checker.DoubleOwnership{Windows: 2, UnsafeWrites: 1},
		Liveness:        checker.Liveness{StuckUntilEnd: true, Orphaned: 1, Orphans: []checker.Orphan{{Reason: "nobody held lock-0 from 0.30s to the end of the run"}}},
	}, FaultLanding: checker.FaultLanding{Injected: len(f.Timeline), Landed: len(f.Timeline)}}
	c := f.Compare(res)
	var missed []string
	for _, m := range c.Mismatches {
		missed = append(missed, m.What+": "+m.Observed)
	}
	assert.Equal(t, []string{
		"double_ownership: notice: Two clients believed they held the lock at the same time; the fenced resource is what keeps this safe.",
		"liveness: failed: The lock was orphaned: nobody held lock-0 from 0.30s to the end of the run.",
	}, missed)
}

// A reproduction that asks only some steps to land holds when the same
// checks fail, whichever of its faults met their moment; a scenario that
// asks nothing needs every step landed and run.
func TestExpectLanded(t *testing.T) {
	tests := []struct {
		name, landed string
		landedSteps  int
		notRun       []int
		ok           bool
	}{
		{"every step, all landed", "", 2, nil, true},
		{"every step, one missed", "", 1, nil, false},
		{"every step, one never ran", "", 1, []int{1}, false},
		{"at least one, one landed and one never ran", ">= 1", 1, []int{1}, true},
		{"at least one, none landed", ">= 1", 0, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("incident.yaml", []byte(demo4))
			require.NoError(t, err)
			f.Timeline = append(f.Timeline, f.Timeline[0])
			f.Expect = Expect{Landed: tt.landed}
			c := f.Compare(&checker.Result{FaultLanding: checker.FaultLanding{Injected: 2, Landed: tt.landedSteps}})
			f.stepsNotRun(&c, tt.notRun)
			assert.Equal(t, tt.ok, c.OK(), "%+v", c.Mismatches)
		})
	}
}

// An orphaned lock fails liveness, so a scenario can expect it to.
func TestLivenessCanFail(t *testing.T) {
	f, err := Parse("incident.yaml", []byte(replaceOnce(t, demo4, "fail: [resource]", "fail: [liveness]")))
	require.NoError(t, err)
	assert.Equal(t, []string{"liveness"}, f.Expect.Fail)
	c := f.Compare(&checker.Result{Checks: checker.Checks{Liveness: checker.Liveness{Orphaned: 1}}})
	for _, m := range c.Mismatches {
		assert.NotEqual(t, "liveness", m.What, "liveness failed as expected")
	}
	i := slices.IndexFunc(c.Lines, func(m Mismatch) bool { return m.What == "liveness" })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, "fails", c.Lines[i].Expected)
	assert.Contains(t, c.Lines[i].Observed, "failed: The lock was orphaned")
}

// A reproduction of a run against a service that was already running
// (--addr, recorded in its params) runs against the same service, under
// keys of its own.
func TestConfigTargetsTheAddressesOfTheRun(t *testing.T) {
	f, err := Parse("repro.yaml", []byte(`name: repro-addr
backend: redis
ttl: 500ms
clients: 2
time_limit: 3s
params: {addr: "127.0.0.1:6379,127.0.0.1:6380", key_prefix: "lockcheck:old:"}
expect: {verdict: "false", fail: [lease_safety]}
`))
	require.NoError(t, err)
	cfg := f.Config(t.TempDir(), nil, nil)
	assert.Equal(t, []string{"127.0.0.1:6379", "127.0.0.1:6380"}, cfg.Addrs)
	assert.NotEqual(t, "lockcheck:old:", cfg.KeyPrefix, "keys of its own")
	assert.Equal(t, cfg.KeyPrefix, cfg.Run.Params[harness.ParamKeyPrefix])
}

// On real servers behind the process runtime's proxies: a partition step
// cuts exactly the links it names, c0 from the redis node, for its
// duration, heals them, and lands; c1 goes on being granted meanwhile.
func TestPartitionStepCutsItsLinks(t *testing.T) {
	const cut = `name: cut-c0
backend: redis
variant: correct
ttl: 300ms
clients: 2
time_limit: 2500ms
timeline:
  - at: 300ms
    do: partition
    target: c0
    links: [redis-0]
    for: 1s
expect:
  hold: [lease_safety]
`
	f, err := Parse("cut.yaml", []byte(cut))
	require.NoError(t, err)
	o, err := Run(context.Background(), f, t.TempDir(), catalog.Programs{}, nil)
	require.NoError(t, err)
	assert.True(t, o.Comparison.OK(), "%+v", o.Comparison.Mismatches)
	var parts, heals []history.Event
	c1Granted := false
	for _, e := range o.History.Events {
		switch {
		case e.F == history.NemPartition:
			parts = append(parts, e)
		case e.F == history.NemHeal:
			heals = append(heals, e)
		case len(parts) == 1 && len(heals) == 0 && e.Process == 1 && e.F == "acquire" && e.Type == history.OK:
			c1Granted = true
		}
	}
	require.Len(t, parts, 1)
	assert.Equal(t, "c0", parts[0].Value.Target)
	assert.Equal(t, []string{"redis-0"}, parts[0].Value.Links)
	require.Len(t, heals, 1)
	assert.Empty(t, heals[0].Value.Detail, "healed")
	assert.GreaterOrEqual(t, heals[0].Time-parts[0].Time, int64(time.Second))
	assert.True(t, c1Granted, "the cut was c0's alone")
}

// A step is refused before anything runs when the run cannot give it what
// it needs: a grant during a failover needs a service that fails over by
// itself, a partition links that can be cut.
func TestStepsNeedWhatTheRunOffers(t *testing.T) {
	tests := []struct {
		name, backend, step string
		params              map[string]string
		want                string
	}{
		{"failover grant on sentinel", "sentinel", "when: {client: any, reaches: failover-grant}\n    do: pause\n    target: c0", nil, ""},
		{"failover grant on redis", "redis", "when: {client: any, reaches: failover-grant}\n    do: pause\n    target: c0", nil, "step 1 (pause c0) needs a service that fails over by itself"},
		{"partition behind proxies", "redis", "do: partition\n    target: c0\n    links: [redis-0]\n    for: 1s", nil, ""},
		{"partition with no proxies", "redis", "do: partition\n    target: c0\n    links: [redis-0]\n    for: 1s", map[string]string{harness.ParamNetwork: harness.NetworkDirect}, "step 1 (partition c0) needs links between clients and nodes that lockcheck can cut"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := "name: needs\nbackend: " + tt.backend + "\nclients: 2\ntime_limit: 3s\ntimeline:\n  - at: 0s\n    " + tt.step + "\nexpect: {}\n"
			f, err := Parse("needs.yaml", []byte(data))
			if err == nil {
				// What the scenario file cannot say alone (the
				// network of the run) is refused before the run.
				b, _, lerr := catalog.Lookup(f.Backend, f.Variant)
				require.NoError(t, lerr)
				err = harness.CheckFaults(f.Config(t.TempDir(), catalog.Programs{}, tt.params), b)
			}
			if tt.want == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tt.want)
			}
		})
	}
}

// "not true" is met by a false or an unknown verdict, never by a pass.
func TestExpectNotTrue(t *testing.T) {
	for _, tt := range []struct {
		valid checker.Validity
		ok    bool
	}{
		{checker.Invalid, true},
		{checker.Unknown, true},
		{checker.Valid, false},
	} {
		t.Run(tt.valid.String(), func(t *testing.T) {
			f, err := Parse("incident.yaml", []byte(replaceOnce(t, demo4, "verdict: false", `verdict: "not true"`)))
			require.NoError(t, err)
			f.Expect = Expect{Verdict: f.Expect.Verdict, Landed: ">= 0"}
			c := f.Compare(&checker.Result{Valid: tt.valid})
			assert.Equal(t, tt.ok, c.OK(), "%+v", c.Mismatches)
		})
	}
}
