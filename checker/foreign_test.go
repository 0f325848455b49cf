package checker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/history"
)

// The histories of these tests are written as another program writes them:
// JSON lines by hand, with the fields docs/history.md documents and nothing
// lockcheck's own recorder adds unless the test says so.

// foreign reads a hand-written history.
func foreign(t *testing.T, lines ...string) *history.History {
	t.Helper()
	h, err := history.Read(strings.NewReader(strings.Join(lines, "\n") + "\n"))
	require.NoError(t, err)
	return h
}

// foreignCycles are two clients taking turns on lock-0, each writing the
// counter under the lock, from 1.000 s to 1.018 s.
var foreignCycles = []string{
	`{"index": 1, "time": 1000000000, "process": 0, "type": "invoke", "f": "acquire", "key": "lock-0"}`,
	`{"index": 2, "time": 1001000000, "process": 0, "type": "ok", "f": "acquire", "key": "lock-0", "value": {"token": "a", "ttl_ms": 1000}}`,
	`{"index": 3, "time": 1002000000, "process": 0, "type": "invoke", "f": "write", "key": "lock-0", "value": {"value": 1, "read": 0, "req": "w1"}}`,
	`{"index": 4, "time": 1003000000, "process": 0, "type": "ok", "f": "write", "key": "lock-0", "value": {"accepted": true, "prev": 0}}`,
	`{"index": 5, "time": 1004000000, "process": 0, "type": "invoke", "f": "release", "key": "lock-0", "value": {"token": "a"}}`,
	`{"index": 6, "time": 1005000000, "process": 0, "type": "ok", "f": "release", "key": "lock-0", "value": {"accepted": true}}`,
	`{"index": 7, "time": 1010000000, "process": 1, "type": "invoke", "f": "acquire", "key": "lock-0"}`,
	`{"index": 8, "time": 1011000000, "process": 1, "type": "ok", "f": "acquire", "key": "lock-0", "value": {"token": "b", "ttl_ms": 1000}}`,
	`{"index": 9, "time": 1012000000, "process": 1, "type": "invoke", "f": "write", "key": "lock-0", "value": {"value": 2, "read": 1, "req": "w2"}}`,
	`{"index": 10, "time": 1013000000, "process": 1, "type": "ok", "f": "write", "key": "lock-0", "value": {"accepted": true, "prev": 1}}`,
	`{"index": 11, "time": 1014000000, "process": 1, "type": "invoke", "f": "release", "key": "lock-0", "value": {"token": "b"}}`,
	`{"index": 12, "time": 1015000000, "process": 1, "type": "ok", "f": "release", "key": "lock-0", "value": {"accepted": true}}`,
}

// jsonOf is v as results.json writes it.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func withLines(head string, body []string, tail ...string) []string {
	return append(append([]string{head}, body...), tail...)
}

// A history that numbers its nemesis steps from 0 (the schema allows it):
// step 0's pause belongs to step 0's landing like any other step's, and a
// promotion the service made, which names no step, is still observed.
func TestForeignStepZeroIsAStep(t *testing.T) {
	h := foreign(t, withLines(`{"lockcheck_history": 1, "config": {"backend": "my-lock", "workload": "fenced", "nemesis": ["pause-node"], "ttl_ms": 1000}}`,
		foreignCycles,
		`{"index": 13, "time": 1020000000, "process": "nemesis", "type": "info", "f": "pause", "value": {"target": "n1", "step": 0}}`,
		`{"index": 14, "time": 1030000000, "process": "nemesis", "type": "info", "f": "resume", "value": {"target": "n1", "step": 0}}`,
		`{"index": 15, "time": 1030000001, "process": "nemesis", "type": "info", "f": "landing", "value": {"step": 0, "fault": "pause-node", "landed": false, "detail": "n1 was stopped 10ms of the 1s asked: the run ended first"}}`,
		`{"index": 16, "time": 1040000000, "process": "nemesis", "type": "info", "f": "switch-master", "value": {"target": "n2"}}`,
		`{"index": 17, "time": 1050000000, "process": "nemesis", "type": "info", "f": "run-end", "value": {}}`)...)
	r := Check(h, nil, Options{})
	require.Len(t, r.Faults, 2)
	pause, promotion := r.Faults[0], r.Faults[1]
	assert.False(t, pause.Landed, "step 0's landing says it missed")
	assert.Equal(t, "n1 was stopped 10ms of the 1s asked: the run ended first", pause.Why)
	assert.Contains(t, jsonOf(t, pause), `"step":0,`, "results.json names step 0")
	assert.True(t, promotion.Landed)
	assert.NotContains(t, jsonOf(t, promotion), `"step"`, "the service's own promotion belongs to no step")
	assert.Equal(t, 1, r.FaultLanding.Injected)
	assert.Equal(t, 0, r.FaultLanding.Landed, "fault_landing and the fault agree")
	assert.Equal(t, Unknown, r.Valid, r.Reason)
	assert.Contains(t, r.Reason, "No fault landed")
}

// A landing event with no detail (or no fault name) still gives a reason a
// person can read.
func TestForeignLandingWithoutDetail(t *testing.T) {
	for _, tt := range []struct {
		name, landing, missed string
	}{
		{"no detail", `{"step": 1, "fault": "pause-node", "landed": false}`, "pause-node (its landing event gives no reason)"},
		{"no fault and no detail", `{"step": 2, "landed": false}`, "step 2 (its landing event names no fault and gives no reason)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := foreign(t, withLines(`{"lockcheck_history": 1, "config": {"backend": "my-lock", "workload": "fenced", "nemesis": ["pause-node"], "ttl_ms": 1000}}`,
				foreignCycles,
				`{"index": 13, "time": 1030000001, "process": "nemesis", "type": "info", "f": "landing", "value": `+tt.landing+`}`,
				`{"index": 14, "time": 1050000000, "process": "nemesis", "type": "info", "f": "run-end", "value": {}}`)...)
			r := Check(h, nil, Options{})
			assert.Equal(t, tt.missed, r.FaultLanding.Missed)
			assert.Contains(t, r.Reason, "("+tt.missed+")")
			assert.NotContains(t, r.Reason, ": )")
		})
	}
}

// The header's started says the history is a run's (lockcheck's or a
// recorder's that follows its rules): without a run-end it is incomplete,
// and the reason says so without blaming lockcheck, which did not write it.
// A history without started is an account: never incomplete.
func TestForeignStartedDecidesIncomplete(t *testing.T) {
	t.Run("started, no run-end", func(t *testing.T) {
		h := foreign(t, withLines(`{"lockcheck_history": 1, "started": "2026-11-30T05:00:00Z", "config": {"backend": "my-lock", "workload": "fenced", "ttl_ms": 1000}}`, foreignCycles)...)
		r := Check(h, nil, Options{})
		assert.True(t, r.Incomplete)
		assert.Equal(t, Unknown, r.Valid)
		assert.Contains(t, r.Reason, "ends without a run-end event")
		assert.NotContains(t, r.Reason, "lockcheck was killed")
	})
	t.Run("no started, no run-end", func(t *testing.T) {
		h := foreign(t, withLines(`{"lockcheck_history": 1, "config": {"backend": "my-lock", "workload": "fenced", "ttl_ms": 1000}}`, foreignCycles)...)
		r := Check(h, nil, Options{})
		assert.False(t, r.Incomplete)
		assert.Equal(t, Valid, r.Valid, r.Reason)
	})
}

// A resource log whose keys are not the history's (it names the data,
// "orders", where the history names the lock, "lock-0") cannot be tied to
// the history's writes: the resource check is unknown and says why.
func TestForeignResourceLogOnOtherKeys(t *testing.T) {
	h := foreign(t, withLines(`{"lockcheck_history": 1, "config": {"backend": "my-lock", "workload": "fenced", "ttl_ms": 1000}}`,
		foreignCycles,
		`{"index": 13, "time": 1050000000, "process": "nemesis", "type": "info", "f": "run-end", "value": {}}`)...)
	log := []history.ResourceEntry{
		{Seq: 1, Time: 1002500000, Key: "orders", Process: 0, Req: "w1", Read: 0, Value: 1, Prev: 0, Accepted: true},
		{Seq: 2, Time: 1012500000, Key: "orders", Process: 1, Req: "w2", Read: 1, Value: 2, Prev: 1, Accepted: true},
	}
	r := Check(h, log, Options{})
	assert.Equal(t, StateUnknown, r.Checks.Resource.State)
	assert.Contains(t, r.Checks.Resource.StateReason, `"orders"`)
	assert.Contains(t, r.Checks.Resource.StateReason, `"lock-0"`)
	assert.Equal(t, Unknown, r.Valid, r.Reason)
}

// Server-side times carried onto the history's clock through a wall-clock
// offset that drifted during the run (NTP slewing) may be off by the drift:
// lockcheck widens every lease's clock allowance by it, so that a grant a
// few milliseconds inside another's lease is no certain violation.
func TestForeignClockDrift(t *testing.T) {
	lines := func(header string) []string {
		return []string{header,
			`{"index": 1, "time": 1000000000, "process": 0, "type": "invoke", "f": "acquire", "key": "lock-0"}`,
			`{"index": 2, "time": 1001000000, "process": 0, "type": "ok", "f": "acquire", "key": "lock-0", "value": {"token": "a", "fence": 1, "ttl_ms": 100}}`,
			`{"index": 3, "time": 1002000000, "process": 0, "type": "invoke", "f": "write", "key": "lock-0", "value": {"value": 1, "read": 0, "fence": 1, "req": "w1"}}`,
			`{"index": 4, "time": 1003000000, "process": 0, "type": "ok", "f": "write", "key": "lock-0", "value": {"accepted": true, "prev": 0}}`,
			`{"index": 5, "time": 1090000000, "process": 1, "type": "invoke", "f": "acquire", "key": "lock-0"}`,
			`{"index": 6, "time": 1095000000, "process": 1, "type": "ok", "f": "acquire", "key": "lock-0", "value": {"token": "b", "fence": 2, "ttl_ms": 100}}`,
			`{"index": 7, "time": 1096000000, "process": 1, "type": "invoke", "f": "write", "key": "lock-0", "value": {"value": 2, "read": 1, "fence": 2, "req": "w2"}}`,
			`{"index": 8, "time": 1097000000, "process": 1, "type": "ok", "f": "write", "key": "lock-0", "value": {"accepted": true, "prev": 1}}`,
			`{"index": 9, "time": 1098000000, "process": 0, "type": "invoke", "f": "release", "key": "lock-0", "value": {"token": "a"}}`,
			`{"index": 10, "time": 1099000000, "process": 0, "type": "ok", "f": "release", "key": "lock-0", "value": {"accepted": false}}`,
			`{"index": 11, "time": 1110000000, "process": 1, "type": "invoke", "f": "release", "key": "lock-0", "value": {"token": "b"}}`,
			`{"index": 12, "time": 1111000000, "process": 1, "type": "ok", "f": "release", "key": "lock-0", "value": {"accepted": true}}`,
		}
	}
	steady := Check(foreign(t, lines(`{"lockcheck_history": 1, "config": {"backend": "my-lock", "workload": "fenced", "ttl_ms": 100}}`)...), nil, Options{})
	assert.Equal(t, 1, steady.Checks.LeaseSafety.Violations, "c1 was granted 2.9 ms inside c0's lease")

	drifted := Check(foreign(t, lines(`{"lockcheck_history": 1, "config": {"backend": "my-lock", "workload": "fenced", "ttl_ms": 100}, "wall_offset_ns": {"start": 1764478800000000000, "end": 1764478800010000000}}`)...), nil, Options{})
	assert.Zero(t, drifted.Checks.LeaseSafety.Violations, "within the 10 ms the clock offset drifted")
	assert.Contains(t, jsonOf(t, drifted), `"clock_drift_ms":10,`, "results.json says by how much")
	assert.Equal(t, Valid, drifted.Valid, drifted.Reason)
}
