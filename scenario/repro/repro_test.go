package repro

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/scenario"
)

const ms = int64(time.Millisecond)

// t0 is when the fixtures' runs start, on the history's clock.
const t0 = int64(1_000_000_000)

// nem is a nemesis event t milliseconds after t0.
func nem(t int64, f string, v history.Value) history.Event {
	return history.Event{Time: t0 + t*ms, Process: history.Nemesis, Type: history.Info, F: f, Value: &v}
}

// failed is the result of a run of limit ms that ended false, with the
// faults the checker found in it.
func failed(limit int64, faults ...checker.Fault) *checker.Result {
	return &checker.Result{Valid: checker.Invalid, Span: checker.Interval{Start: t0, End: t0 + limit*ms}, Faults: faults}
}

// failingRun is a redis run of 3 clients in which step 2, pause-holder,
// stopped c4 (slot 1, restarted once) at before-write for 1s, and c0 was
// granted the lock during the pause; step 1, a pause of a node long
// before, and step 3, a failover after, were not in force.
func failingRun() (*history.History, *checker.Result) {
	h := &history.History{
		Header: history.Header{StartTime: t0 - 300*ms, Config: history.RunConfig{
			Backend: "redis", Variant: "correct", Workload: "unfenced", Nemesis: []string{"pause-holder"},
			Clients: 3, TTLms: 500, TimeLimitMs: 10_000, Think: "20ms", Params: map[string]string{"skew": "20s"},
			CommandLine: []string{"lockcheck", "run", "--nemesis", "pause-holder"},
		}},
		Events: []history.Event{
			{Time: t0, Process: 0, Type: history.Invoke, F: "acquire", Key: "k0"},
			nem(1000, history.NemPause, history.Value{Target: "redis-0", DurationMs: 200, Step: history.Int(1)}),
			nem(1200, history.NemResume, history.Value{Target: "redis-0", Step: history.Int(1)}),
			nem(1200, history.NemLanding, history.Value{Fault: "pause-node", Step: history.Int(1), Landed: history.Bool(true)}),
			nem(4000, history.NemFailpoint, history.Value{Target: "c4", Failpoint: "before-write", Step: history.Int(2)}),
			nem(4001, history.NemPause, history.Value{Target: "c4", Failpoint: "before-write", DurationMs: 1000, Step: history.Int(2)}),
			nem(5001, history.NemResume, history.Value{Target: "c4", Step: history.Int(2)}),
			nem(5001, history.NemLanding, history.Value{Fault: "pause-holder", Step: history.Int(2), Landed: history.Bool(true)}),
			nem(8000, "switch-master", history.Value{Target: "redis-1", Step: history.Int(3)}),
			nem(8100, history.NemLanding, history.Value{Fault: "failover-lost-lock", Step: history.Int(3), Landed: history.Bool(true)}),
		},
	}
	res := failed(10_000,
		checker.Fault{Kind: "pause", Target: "redis-0", Start: t0 + 1000*ms, End: t0 + 1200*ms, Step: history.Int(1)},
		checker.Fault{Kind: "pause", Target: "c4", Start: t0 + 4001*ms, End: t0 + 5001*ms, Failpoint: "before-write", Step: history.Int(2)},
		checker.Fault{Kind: "switch-master", Target: "redis-1", Start: t0 + 8000*ms, End: t0 + 8000*ms, Step: history.Int(3)},
	)
	res.Checks.LeaseSafety.Valid = true
	res.Checks.DoubleOwnership = checker.DoubleOwnership{Windows: 1, UnsafeWrites: 1,
		List: []checker.Window{{Start: t0 + 4600*ms, End: t0 + 5001*ms, Unsafe: 1}}}
	res.Checks.Resource = checker.ResourceSafety{LostUpdates: 1,
		Anomalies: []checker.ResourceAnomaly{{Kind: "lost-update", Time: t0 + 5002*ms}}}
	res.Checks.Fencing.Valid = true
	res.Checks.Linearizability.Result = "ok"
	return h, res
}

func TestFromRunRoundTrips(t *testing.T) {
	h, res := failingRun()
	data, err := FromRun("run-1", h, res).Marshal()
	require.NoError(t, err)
	f, err := scenario.Parse(File, data)
	require.NoError(t, err, "%s", data)

	assert.Equal(t, "repro-run-1", f.Name)
	assert.Equal(t, "redis", f.Backend)
	assert.Equal(t, "correct", f.Variant)
	assert.Equal(t, "unfenced", f.Workload)
	assert.Equal(t, 500*time.Millisecond, f.TTL.D())
	assert.Equal(t, 3, f.Clients)
	assert.Equal(t, 8002*time.Millisecond, f.TimeLimit.D(), "four leases and a second after the lost update at 5.002s")
	assert.Equal(t, map[string]string{"skew": "20s"}, f.Params)
	assert.Equal(t, "false", f.Expect.Verdict)
	assert.ElementsMatch(t, []string{"double_ownership", "resource"}, f.Expect.Fail)
	assert.Equal(t, ">= 1", f.Expect.Landed)
	// Only the pause in force around the anomalies, aimed at the failpoint
	// of the client's slot, a lease before the run found it there.
	require.Len(t, f.Timeline, 1, "%s", data)
	assert.Equal(t, scenario.Step{
		At: scenario.Duration(3500 * time.Millisecond), When: &scenario.When{Client: "c1", Reaches: "before-write"},
		Do: "pause", Target: "c1", For: scenario.Duration(time.Second),
	}, f.Timeline[0])
}

func TestFromRunAims(t *testing.T) {
	h, res := failingRun()
	// A lease violation around the failover and the node pause: the node
	// pause is said in the timeline's verbs at its time, the failover is
	// replayed as the fault itself.
	t0 := res.Span.Start
	res.Checks.LeaseSafety = checker.LeaseSafety{Violations: 1, Evidence: []checker.LeaseViolation{{
		Earlier: checker.Grant{Invoke: t0 + 900*ms}, Later: checker.Grant{OK: t0 + 8050*ms},
	}}}
	f, err := scenario.Parse(File, must(FromRun("run-2", h, res).Marshal()))
	require.NoError(t, err)
	require.Len(t, f.Timeline, 3)
	assert.Equal(t, scenario.Step{At: scenario.Duration(time.Second), Do: "pause", Target: "redis-0", For: scenario.Duration(200 * time.Millisecond)}, f.Timeline[0])
	assert.Equal(t, "pause", f.Timeline[1].Do)
	assert.Equal(t, scenario.Step{At: scenario.Duration(7500 * time.Millisecond), Do: "fault", Fault: "failover-lost-lock"}, f.Timeline[2])
	assert.Contains(t, f.Expect.Fail, "lease_safety")
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	h, res := failingRun()
	path, err := Write(dir, h, res)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, File), path)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Regexp(t, `^# Replay rate: not measured for this repro \(lockcheck shrink replays it --tries times and says how often it failed\); `+
		`reproductions of other redis runs under pause-holder failed the same checks in \d+ of 10 replays \(a class rate, measured on other failures; docs/scenarios.md\)\.\n`, string(data))

	// A run that ended true writes none, and leaves no stale one behind.
	res.Valid = checker.Valid
	path, err = Write(dir, h, res)
	require.NoError(t, err)
	assert.Empty(t, path)
	_, err = os.Stat(filepath.Join(dir, File))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// A run of a scenario that ended false is reproduced by the scenario as
// run, expecting the checks that failed; lockcheck check of that run
// keeps it rather than retelling the timeline from the history.
func TestWriteScenario(t *testing.T) {
	dir := t.TempDir()
	h, res := failingRun()
	f := &scenario.File{
		Name: "my-incident", Title: "GC pause past the TTL", Backend: "redis", Variant: "correct", Workload: "unfenced",
		TTL: scenario.Duration(300 * time.Millisecond), Clients: 2, Think: "20ms", TimeLimit: scenario.Duration(3 * time.Second),
		Timeline: []scenario.Step{{At: scenario.Duration(500 * time.Millisecond), When: &scenario.When{Client: "c0", Reaches: "before-write"},
			Do: "pause", Target: "c0", For: scenario.Duration(900 * time.Millisecond)}},
		Expect: scenario.Expect{Verdict: "false", Fail: []string{"resource"}, Counts: map[string]string{"resource.lost_updates": ">= 1"}},
	}
	path, err := WriteScenario(dir, f, h, res)
	require.NoError(t, err)
	got, err := scenario.Parse(path, must(os.ReadFile(path)))
	require.NoError(t, err)
	assert.Equal(t, "repro-my-incident", got.Name)
	assert.Equal(t, f.Timeline, got.Timeline)
	assert.Equal(t, scenario.Expect{Verdict: "false", Fail: []string{"double_ownership", "resource"}}, got.Expect)

	h.Header.Config.Scenario = &history.ScenarioInfo{Name: f.Name}
	again, err := Write(dir, h, res)
	require.NoError(t, err)
	assert.Equal(t, path, again)
	kept, err := scenario.Parse(path, must(os.ReadFile(path)))
	require.NoError(t, err)
	assert.Equal(t, f.Timeline, kept.Timeline, "check keeps the scenario as run")

	res.Valid = checker.Valid
	path, err = WriteScenario(dir, f, h, res)
	require.NoError(t, err)
	assert.Empty(t, path, "a scenario run that did not end false has nothing to reproduce")
}

// redlockRun is a Redlock run of 5 clients that broke lease safety: c1 was
// granted on redlock-2, -3 and -5 (a bare majority), step 2 jumped
// redlock-5's clock +20s while c1 held the lock and put it back 2s later,
// and c3 was granted on redlock-1, -4 and -5 within c1's lease. Step 1
// restarted redlock-2 wiped 700ms before; step 3, a partition 9s later
// (of a container, cut off whole: its event lists no links), was in force
// only in the linearizability window.
func redlockRun() (*history.History, *checker.Result) {
	h := &history.History{
		Header: history.Header{StartTime: t0 - 300*ms, Config: history.RunConfig{
			Backend: "redlock", Variant: "correct", Workload: "unfenced", Nemesis: []string{"kill-restart", "clock-skew", "partition"},
			Clients: 5, TTLms: 1000, TimeLimitMs: 30_000, Think: "20ms", Params: map[string]string{"wipe": "true", "restart-delay": "0s"},
		}},
		Events: []history.Event{
			{Time: t0, Process: 0, Type: history.Invoke, F: "acquire", Key: "k0"},
			nem(4300, history.NemKill, history.Value{Target: "redlock-2", Detail: "data wiped", Step: history.Int(1)}),
			nem(4330, history.NemStart, history.Value{Target: "redlock-2", Detail: "data wiped", Step: history.Int(1)}),
			nem(4330, history.NemLanding, history.Value{Fault: "kill-restart", Step: history.Int(1), Landed: history.Bool(true)}),
			nem(5005, history.NemClockJump, history.Value{Target: "redlock-5", Detail: "+20s", Step: history.Int(2)}),
			nem(7005, history.NemClockReset, history.Value{Target: "redlock-5", Detail: "reset", Step: history.Int(2)}),
			nem(7005, history.NemLanding, history.Value{Fault: "clock-skew", Step: history.Int(2), Landed: history.Bool(true)}),
			nem(14000, history.NemPartition, history.Value{Target: "redlock-1", Step: history.Int(3)}),
			nem(16000, history.NemHeal, history.Value{Target: "redlock-1", Step: history.Int(3)}),
			nem(16000, history.NemLanding, history.Value{Fault: "partition", Step: history.Int(3), Landed: history.Bool(true)}),
		},
	}
	res := failed(30_000,
		checker.Fault{Kind: "kill", Target: "redlock-2", Start: t0 + 4300*ms, End: t0 + 4330*ms, Step: history.Int(1)},
		checker.Fault{Kind: "clock-jump", Target: "redlock-5", Start: t0 + 5005*ms, End: t0 + 7005*ms, Step: history.Int(2)},
		checker.Fault{Kind: "partition", Target: "redlock-1", Start: t0 + 14000*ms, End: t0 + 16000*ms, Step: history.Int(3)},
	)
	res.Checks.LeaseSafety = checker.LeaseSafety{Violations: 1, Evidence: []checker.LeaseViolation{{
		Earlier: checker.Grant{Process: 1, Invoke: t0 + 5000*ms, OK: t0 + 5003*ms, Nodes: []string{"redlock-2", "redlock-3", "redlock-5"}},
		Later:   checker.Grant{Process: 3, Invoke: t0 + 5010*ms, OK: t0 + 5015*ms, Nodes: []string{"redlock-1", "redlock-4", "redlock-5"}},
	}}}
	res.Checks.Fencing.Valid = true
	res.Checks.Resource.Valid = true
	res.Checks.Linearizability.Result = checker.NotLinearizable
	res.Checks.Linearizability.Window = &checker.Interval{Start: t0 + 5000*ms, End: t0 + 15000*ms}
	return h, res
}

// A Redlock repro pins what the run drew: the restart of the node it
// killed, wiped; the clock jump of the node it moved, by its offset, put
// back after as long, waiting for the moment it met (a client granted on
// a bare majority with redlock-5 among them, as c1 was); and not the partition the
// linearizability window alone pulled in.
func TestFromRunPinsWhatTheRunDrew(t *testing.T) {
	h, res := redlockRun()
	f, err := scenario.Parse(File, must(FromRun("run-3", h, res).Marshal()))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"lease_safety", "linearizability"}, f.Expect.Fail)
	require.Len(t, f.Timeline, 2, "%+v", f.Timeline)
	assert.Equal(t, scenario.Step{At: scenario.Duration(4300 * time.Millisecond), Do: "restart", Target: "redlock-2", Wipe: true}, f.Timeline[0])
	assert.Equal(t, scenario.Step{
		// A lease early, but not before the restart.
		At: scenario.Duration(4300 * time.Millisecond), When: &scenario.When{Client: "any", Reaches: "bare-majority", Node: "redlock-5"},
		Do: "clock", Target: "redlock-5", Offset: scenario.Duration(20 * time.Second), For: scenario.Duration(2 * time.Second),
	}, f.Timeline[1])
	assert.Equal(t, 26300*time.Millisecond, f.TimeLimit.D(), "four leases and a second after the clock step ends: at 4.3s, 15s to meet its moment, 2s long")

	// Linearizability alone failing keeps what its window pulls in.
	res.Checks.LeaseSafety = checker.LeaseSafety{Valid: true}
	f, err = scenario.Parse(File, must(FromRun("run-4", h, res).Marshal()))
	require.NoError(t, err)
	assert.Equal(t, "fault", f.Timeline[len(f.Timeline)-1].Do, "a container cut off whole is replayed as the fault: %+v", f.Timeline)
}

// A partition is pinned as the links it cut: each target cut from the
// nodes and clients its event lists, for as long as it held until its
// heal; links two halves record from both sides are cut once, and a
// restarted client is named by its slot.
func TestFromRunPinsPartitions(t *testing.T) {
	h, res := redlockRun()
	t0 := res.Span.Start
	var evs []history.Event
	for _, e := range h.Events {
		if e.Value == nil || e.Value.Step == nil || *e.Value.Step != 3 {
			evs = append(evs, e)
		}
	}
	nem := func(t int64, f string, v history.Value) history.Event {
		v.Step = history.Int(3)
		return history.Event{Time: t0 + t*ms, Process: history.Nemesis, Type: history.Info, F: f, Value: &v}
	}
	// partition-halves: redlock-1 and c6 (slot 1) on one side.
	h.Events = append(evs,
		nem(14000, history.NemPartition, history.Value{Target: "c6", DurationMs: 2000, Links: []string{"redlock-5", "redlock-3", "c0"}}),
		nem(14000, history.NemPartition, history.Value{Target: "redlock-1", DurationMs: 2000, Links: []string{"redlock-5", "redlock-3", "c0"}}),
		nem(14001, history.NemPartition, history.Value{Target: "redlock-5", DurationMs: 2000, Links: []string{"redlock-1", "c6"}}),
		nem(16003, history.NemHeal, history.Value{Target: "c6"}),
		nem(16003, history.NemHeal, history.Value{Target: "redlock-1"}),
		nem(16003, history.NemHeal, history.Value{Target: "redlock-5"}),
		nem(16003, history.NemLanding, history.Value{Fault: "partition-halves", Landed: history.Bool(true)}),
	)
	res.Checks.LeaseSafety = checker.LeaseSafety{Valid: true}
	f, err := scenario.Parse(File, must(FromRun("run-6", h, res).Marshal()))
	require.NoError(t, err)
	cut := func(target string, links ...string) scenario.Step {
		return scenario.Step{At: scenario.Duration(14 * time.Second), Do: "partition", Target: target, Links: links, For: scenario.Duration(2003 * time.Millisecond)}
	}
	tl := f.Timeline
	require.GreaterOrEqual(t, len(tl), 2, "%+v", tl)
	assert.Equal(t, []scenario.Step{cut("c1", "redlock-5", "redlock-3", "c0"), cut("redlock-1", "redlock-5", "redlock-3", "c0")}, tl[len(tl)-2:],
		"redlock-5's cut from redlock-1 and c1 is the same links again")
}

// Fences are state the whole run built: a fence anomaly keeps every step
// before it, the partition long before among them.
func TestFromRunKeepsWhatBuiltTheFences(t *testing.T) {
	h, res := redlockRun()
	t0 := res.Span.Start
	res.Checks.Fencing = checker.Fencing{Regressions: 1, Anomalies: []checker.FenceAnomaly{{
		Kind: "regression", Earlier: checker.Grant{OK: t0 + 20_000*ms}, Later: checker.Grant{Invoke: t0 + 20_100*ms, OK: t0 + 20_200*ms},
	}}}
	f, err := scenario.Parse(File, must(FromRun("run-5", h, res).Marshal()))
	require.NoError(t, err)
	require.Len(t, f.Timeline, 3, "%+v", f.Timeline)
	assert.Equal(t, scenario.Step{At: scenario.Duration(13 * time.Second), Do: "fault", Fault: "partition"}, f.Timeline[2])
}

// A Sentinel run: step 1 cut the master redis-0 off from the other nodes
// and the clients; the sentinels promoted redis-1 at 5.5s, which granted
// c2 the lock at once while c0's lease from redis-0 stood; step 2 paused
// c0 between the switch and that grant. The partition is pinned as its links, and the pause
// waits for a grant during a failover again, a lease before it acted.
func TestFromRunWaitsForTheFailoverGrant(t *testing.T) {
	rest := []string{"redis-1", "redis-2", "sentinel-0", "sentinel-1", "sentinel-2", "c0", "c1", "c2"}
	h := &history.History{
		Header: history.Header{StartTime: t0 - 300*ms, Config: history.RunConfig{
			Backend: "sentinel", Variant: "correct", Workload: "unfenced", Nemesis: []string{"partition", "pause-client"},
			Clients: 3, TTLms: 1000, TimeLimitMs: 30_000, Think: "20ms",
		}},
		Events: []history.Event{
			{Time: t0, Process: 0, Type: history.Invoke, F: "acquire", Key: "k0"},
			nem(3000, history.NemPartition, history.Value{Target: "redis-0", DurationMs: 4000, Links: rest, Step: history.Int(1)}),
			nem(5500, history.NemSwitchMaster, history.Value{Target: "redis-1", Detail: "redis-0 -> redis-1"}),
			nem(5505, history.NemPause, history.Value{Target: "c0", DurationMs: 1000, Step: history.Int(2)}),
			nem(6505, history.NemResume, history.Value{Target: "c0", Step: history.Int(2)}),
			nem(6600, history.NemLanding, history.Value{Fault: "pause-client", Step: history.Int(2), Landed: history.Bool(true)}),
			nem(7002, history.NemHeal, history.Value{Target: "redis-0", Step: history.Int(1)}),
			nem(7002, history.NemLanding, history.Value{Fault: "partition", Step: history.Int(1), Landed: history.Bool(true)}),
		},
	}
	res := failed(30_000,
		checker.Fault{Kind: "partition", Target: "redis-0", Start: t0 + 3000*ms, End: t0 + 7002*ms, Step: history.Int(1)},
		checker.Fault{Kind: history.NemSwitchMaster, Target: "redis-1", Start: t0 + 5500*ms, End: t0 + 5500*ms},
		checker.Fault{Kind: "pause", Target: "c0", Start: t0 + 5505*ms, End: t0 + 6505*ms, Step: history.Int(2)},
	)
	res.Checks.LeaseSafety = checker.LeaseSafety{Violations: 1, Evidence: []checker.LeaseViolation{{
		Earlier: checker.Grant{Process: 0, Invoke: t0 + 5000*ms, OK: t0 + 5002*ms},
		Later:   checker.Grant{Process: 2, Invoke: t0 + 5510*ms, OK: t0 + 5515*ms},
	}}}
	res.Checks.Fencing.Valid, res.Checks.Resource.Valid = true, true
	res.Checks.Linearizability.Result = "ok"
	f, err := scenario.Parse(File, must(FromRun("run-7", h, res).Marshal()))
	require.NoError(t, err)
	require.Len(t, f.Timeline, 2, "%+v", f.Timeline)
	assert.Equal(t, scenario.Step{At: scenario.Duration(3 * time.Second), Do: "partition", Target: "redis-0", Links: rest, For: scenario.Duration(4002 * time.Millisecond)}, f.Timeline[0])
	assert.Equal(t, scenario.Step{
		At: scenario.Duration(4505 * time.Millisecond), When: &scenario.When{Client: "any", Reaches: "failover-grant"},
		Do: "pause", Target: "c0", For: scenario.Duration(time.Second),
	}, f.Timeline[1])

	// A pause before the failover is at its time.
	res.Faults[2].Start, h.Events[3].Time, h.Events[4].Time = t0+4800*ms, t0+4800*ms, t0+5800*ms
	f, err = scenario.Parse(File, must(FromRun("run-8", h, res).Marshal()))
	require.NoError(t, err)
	require.Len(t, f.Timeline, 2, "%+v", f.Timeline)
	assert.Nil(t, f.Timeline[1].When)
}

// TestHeaderClaimsOnlyItsOwnReplays: a repro's header never prints a rate
// that was not measured for it; a class rate is cited as one.
func TestHeaderClaimsOnlyItsOwnReplays(t *testing.T) {
	classed := header(history.RunConfig{Backend: "redlock", Nemesis: []string{"pause-node", "kill-restart", "clock-skew"}})
	assert.Contains(t, classed, "# Replay rate: not measured for this repro")
	assert.Contains(t, classed, "reproductions of other redlock runs under pause-node+kill-restart+clock-skew failed the same checks in 10 of 10 replays (a class rate, measured on other failures")
	assert.Equal(t, "# Replay rate: not measured for this repro (lockcheck shrink replays it --tries times and says how often it failed).\n"+
		"# Replay it: lockcheck scenario run --file repro.yaml\n", header(history.RunConfig{Backend: "redis", Nemesis: []string{"kill-client"}}))
}
