package results

import (
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// xss is a string a hostile or careless history could carry in any text field.
const xss = "<script>alert(1)</script>"

// t0 is the CLOCK_MONOTONIC start of the sample run.
const t0 = int64(1_000_000_000_000)

func at(ms int64) int64 { return t0 + ms*1_000_000 }

// hostile carries the strings the sample history and result put in text
// fields, so one fixture serves both ordinary and escaping tests.
type hostile struct{ key, target, errText string }

var plain = hostile{key: "lock", target: "c0", errText: "i/o timeout"}

// sampleHistory is a small pause-holder story: c0 holds the lock, is paused
// past its lease, c1 takes the lock, c0 wakes and writes a lost update, c2's
// write is refused, and c3 dies with its acquire unanswered.
func sampleHistory(s hostile, workload string) *history.History {
	h := &history.History{Header: history.Header{
		Version: history.SchemaVersion, Started: "2025-01-02T03:04:05Z", StartTime: t0,
		Config: history.RunConfig{
			Backend: "redis", Variant: "correct", Workload: workload, Nemesis: []string{"pause-holder"},
			Seed: 1, Clients: 4, Keys: 1, TTLms: 500, TimeLimitMs: 1400, PauseMs: 790,
			CommandLine: []string{"lockcheck", "run", "--backend", "redis", "--think", "1ms 5ms"},
			Versions:    map[string]string{"redis-server": "7.0.15", "go": "go1.26.8"},
		},
	}}
	add := func(ms int64, p history.Process, typ history.Type, f string, v *history.Value) {
		e := history.Event{Index: int64(len(h.Events)), Time: at(ms), Process: p, Type: typ, F: f, Value: v}
		if p != history.Nemesis {
			e.Key = s.key
		}
		h.Events = append(h.Events, e)
	}
	add(0, 0, history.Invoke, history.FAcquire, nil)
	add(5, 0, history.OK, history.FAcquire, &history.Value{Token: "a", Fence: history.Int64(1), TTLms: 500})
	add(8, 0, history.Invoke, history.FWrite, &history.Value{Value: history.Int64(1), Read: history.Int64(0), Fence: history.Int64(1), Req: "r1"})
	add(9, 0, history.OK, history.FWrite, &history.Value{Accepted: history.Bool(true), Prev: history.Int64(0)})
	add(10, history.Nemesis, history.Info, history.NemPause, &history.Value{Target: s.target, DurationMs: 790})
	add(510, 1, history.Invoke, history.FAcquire, nil)
	add(520, 1, history.OK, history.FAcquire, &history.Value{Token: "b", Fence: history.Int64(2), TTLms: 500})
	add(523, 1, history.Invoke, history.FWrite, &history.Value{Value: history.Int64(2), Read: history.Int64(1), Fence: history.Int64(2), Req: "r2"})
	add(524, 1, history.OK, history.FWrite, &history.Value{Accepted: history.Bool(true), Prev: history.Int64(1)})
	add(600, 1, history.Invoke, history.FRelease, &history.Value{Token: "b"})
	add(601, 1, history.OK, history.FRelease, nil)
	add(800, history.Nemesis, history.Info, history.NemResume, &history.Value{Target: s.target})
	add(801, 0, history.Invoke, history.FWrite, &history.Value{Value: history.Int64(1), Read: history.Int64(0), Fence: history.Int64(1), Req: "r3"})
	add(802, 0, history.OK, history.FWrite, &history.Value{Accepted: history.Bool(true), Prev: history.Int64(2)})
	add(803, 0, history.Invoke, history.FRelease, &history.Value{Token: "a"})
	add(804, 0, history.OK, history.FRelease, nil)
	add(900, 2, history.Invoke, history.FAcquire, nil)
	add(905, 2, history.OK, history.FAcquire, &history.Value{Token: "c", Fence: history.Int64(2), TTLms: 500})
	add(910, 2, history.Invoke, history.FWrite, &history.Value{Value: history.Int64(3), Read: history.Int64(2), Fence: history.Int64(1), Req: "r4"})
	add(911, 2, history.OK, history.FWrite, &history.Value{Accepted: history.Bool(false), Prev: history.Int64(2)})
	add(920, 2, history.Invoke, history.FWrite, &history.Value{Value: history.Int64(3), Read: history.Int64(2), Fence: history.Int64(2), Req: "r5"})
	h.Events = append(h.Events, history.Event{Index: int64(len(h.Events)), Time: at(960), Process: 2, Type: history.Info, F: history.FWrite, Key: s.key, Error: s.errText})
	add(950, 3, history.Invoke, history.FAcquire, nil)
	add(1000, 3, history.Info, history.FAcquire, nil)
	return h
}

// goodResult is a result with every check passing.
func goodResult() *checker.Result {
	return &checker.Result{
		Valid:  checker.Valid,
		Reason: "No anomaly in 3 grants.",
		Checks: checker.Checks{
			LeaseSafety:     checker.LeaseSafety{Valid: true},
			Resource:        checker.ResourceSafety{Valid: true, Source: "resource-log"},
			Fencing:         checker.Fencing{Valid: true, Checked: true},
			Linearizability: checker.Linearizability{Result: "ok", Operations: 8, Segments: 1},
			Liveness:        checker.Liveness{Grants: 3, GrantsPerSec: 2.1, LongestStallMs: 380, AcquireAttempts: 4},
		},
		Span: checker.Interval{Start: at(0), End: at(1400)},
	}
}

// badResult is what a checker could say about sampleHistory: every check
// with evidence, linearizability unknown, and the lock orphaned at the end.
func badResult(s hostile) *checker.Result {
	r := goodResult()
	r.Valid = checker.Invalid
	r.Reason = "c0 and c1 both believed they held " + s.key + " for 283 ms while " + s.target + " was paused, and an update was lost."
	c1 := checker.Grant{Key: s.key, Process: 1, Invoke: at(510), OK: at(520), Fence: history.Int64(2), TTLms: 500, CertainEnd: at(600), BeliefEnd: at(600), Index: 6}
	c2 := checker.Grant{Key: s.key, Process: 2, Invoke: at(900), OK: at(905), Fence: history.Int64(2), TTLms: 500, CertainEnd: at(1400), BeliefEnd: at(1400), Index: 17}
	r.Checks.LeaseSafety = checker.LeaseSafety{Violations: 1, Evidence: []checker.LeaseViolation{
		{Key: s.key, Earlier: c1, Later: c2, Faults: []string{"pause " + s.target}},
	}}
	r.Checks.DoubleOwnership = checker.DoubleOwnership{Windows: 1, TotalMs: 80, MaxMs: 80, UnsafeWrites: 1, List: []checker.Window{
		{Key: s.key, Start: at(520), End: at(600), Ms: 80, Processes: []history.Process{0, 1}, Faults: []string{"pause " + s.target}, Writes: []int64{7}, Unsafe: 1},
	}}
	r.Checks.Resource = checker.ResourceSafety{LostUpdates: 1, StaleWritesRefused: 1, Source: "resource-log", Anomalies: []checker.ResourceAnomaly{
		{Kind: "lost-update", Key: s.key, Time: at(802), Process: 0, Fence: history.Int64(1), Read: 0, Prev: 2, Value: 1, Req: "r3"},
		{Kind: "stale-write-refused", Key: s.key, Time: at(911), Process: 2, Fence: history.Int64(1), Highest: history.Int64(2), Read: 2, Prev: 2, Value: 3, Req: "r4"},
	}}
	r.Checks.Fencing = checker.Fencing{Duplicates: 1, Checked: true, Anomalies: []checker.FenceAnomaly{{Kind: "duplicate", Earlier: c1, Later: c2}}}
	r.Checks.Linearizability = checker.Linearizability{Result: "unknown", Operations: 8, Segments: 1,
		Window: &checker.Interval{Start: at(500), End: at(900)}, Detail: "porcupine timed out: " + s.errText}
	r.Checks.Liveness.Stall = &checker.Interval{Start: at(1000), End: at(1400)}
	r.Checks.Liveness.LongestStallMs = 400
	r.Checks.Liveness.StuckUntilEnd = true
	r.Checks.Liveness.StallReason = "c3 died holding " + s.key + " with no TTL: " + s.errText
	r.Checks.Liveness.Orphaned = 1
	r.Checks.Liveness.Orphans = []checker.Orphan{{Key: s.key, From: at(1000), To: at(1400), UntilEnd: true, FirstRefused: at(1010), LastRefused: at(1390),
		Refused: 12, BoundMs: 2000, Reason: "nobody held " + s.key + " from 1.00s to the end of the run: c3 died holding it with no TTL: " + s.errText}}
	r.Faults = []checker.Fault{{Kind: history.NemPause, Target: s.target, Start: at(10), End: at(800), Index: 4}}
	return r
}
