package checker

import (
	"encoding/json"
	"testing"

	"github.com/lockcheck/lockcheck/history"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVerdict(t *testing.T) {
	good := func() Checks {
		return Checks{
			LeaseSafety:     LeaseSafety{Valid: true},
			Resource:        ResourceSafety{Valid: true},
			Fencing:         Fencing{Valid: true},
			Linearizability: Linearizability{Result: Linearizable},
			Liveness:        Liveness{AcquireAttempts: 1, Grants: 1},
		}
	}
	// A history that wrote, and had a write accepted: the run tested
	// something.
	wrote := &history.History{Header: history.Header{Started: "2026-11-30T05:00:00Z"}, Events: []history.Event{
		{Process: 0, Type: history.Invoke, F: history.FWrite}, {Process: 0, Type: history.OK, F: history.FWrite},
		{Process: history.Nemesis, Type: history.Info, F: history.NemRunEnd}}}
	tests := []struct {
		name    string
		change  func(c *Checks)
		fenced  bool
		verdict Validity
	}{
		{"all checks pass", func(*Checks) {}, true, Valid},
		{"lease safety failed", func(c *Checks) { c.LeaseSafety.Valid = false }, true, Invalid},
		{"resource failed", func(c *Checks) { c.Resource.Valid = false }, true, Invalid},
		{"fencing failed", func(c *Checks) { c.Fencing.Valid = false }, true, Invalid},
		{"not linearizable", func(c *Checks) { c.Linearizability.Result = NotLinearizable }, true, Invalid},
		{"linearizability unknown is no pass", func(c *Checks) { c.Linearizability.Result = LinearizabilityUnknown }, true, Unknown},
		{"an unsafe failure beats unknown", func(c *Checks) {
			c.Linearizability.Result = LinearizabilityUnknown
			c.Fencing.Valid = false
		}, true, Invalid},
		{"double ownership with landed writes, unfenced", func(c *Checks) { c.DoubleOwnership = DoubleOwnership{Windows: 1, UnsafeWrites: 1} }, false, Invalid},
		{"double ownership with landed writes, fenced", func(c *Checks) { c.DoubleOwnership = DoubleOwnership{Windows: 1, UnsafeWrites: 1} }, true, Valid},
		{"double ownership with no write, unfenced", func(c *Checks) { c.DoubleOwnership = DoubleOwnership{Windows: 1} }, false, Valid},
		{"no client operation is no pass", func(c *Checks) { c.Liveness.AcquireAttempts = 0 }, true, Unknown},
		{"resource unknown is no pass", func(c *Checks) { c.Resource.State = StateUnknown }, true, Unknown},
		{"double ownership unknown, unfenced", func(c *Checks) { c.DoubleOwnership.State = StateUnknown }, false, Unknown},
		{"double ownership unknown, fenced", func(c *Checks) { c.DoubleOwnership.State = StateUnknown }, true, Valid},
		{"fencing skipped", func(c *Checks) { c.Fencing.State = StateSkipped }, true, Valid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good()
			tt.change(&c)
			assert.Equal(t, tt.verdict, verdict(wrote.Header, scan(wrote, DefaultClockAllowance), &Result{Checks: c}, tt.fenced))
		})
	}
}

func TestReasonOfAPass(t *testing.T) {
	tests := []struct {
		name   string
		b      *builder
		reason string
	}{
		{
			name:   "fenced",
			b:      chain(newBuilder("fenced"), 3),
			reason: "No anomaly: 3 grants, fences rose, no write was lost.",
		},
		{
			name:   "no fences",
			b:      newBuilder("unfenced").Cycle(0, 0, 0, -1, "").Cycle(1, 10, 1, -1, ""),
			reason: "No anomaly: 2 grants, no lease was broken, no write was lost.",
		},
		{
			name: "fencing contained a double ownership",
			b:    pausedHolder("fenced"),
			reason: "No anomaly: 2 grants, fences rose, no write was lost; 1 double-ownership window (longest 9 ms) " +
				"was contained by fencing, which refused 1 stale write.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := check(t, tt.b)
			assert.Equal(t, Valid, r.Valid)
			assert.Equal(t, tt.reason, r.Reason)
		})
	}
}

func TestReasonOfALeaseViolation(t *testing.T) {
	b := newBuilder("fenced")
	b.Acquire(0, 0, 1, 1).Nemesis(5, history.NemPause, "c0", "", "")
	b.Acquire(1, 110, 111, 2)
	b.Nemesis(115, history.NemResume, "c0", "", "").Release(0, 120, 121)
	b.Acquire(2, 125, 126, 3).Release(2, 130, 131).Release(1, 200, 201)
	r := check(t, b)
	assert.Equal(t, Invalid, r.Valid)
	assert.Equal(t, "c2 was granted lock-0 at 0.13s while c1's lease was certainly live until 0.20s (11 ms after the pause of c0 healed); "+
		"c0, c1 and c2 held lock-0 in overlapping turns: two clients believed they held it for 19 ms while c0 was paused.", r.Reason)
}

func TestFaults(t *testing.T) {
	b := newBuilder("fenced").Cycle(0, 0, 0, 1, "")
	b.Nemesis(10, history.NemPause, "c1", "", "").Nemesis(20, history.NemResume, "c1", "", "")
	b.Nemesis(30, history.NemPause, "redis-0", "", "")
	b.Nemesis(40, history.NemKill, "c2", "", "").Nemesis(50, history.NemStart, "c2", "", "")
	b.Nemesis(60, history.NemKill, "c0", "", "")
	b.Nemesis(62, history.NemPartition, "redis-1", "", "").Nemesis(65, history.NemHeal, "redis-1", "", "")
	b.Nemesis(66, history.NemPartition, "redis-2", "", "")
	b.Nemesis(70, history.NemRunEnd, "", "", "")
	r := check(t, b)
	type span struct {
		kind, target string
		start, end   float64
	}
	var got []span
	for _, f := range r.Faults {
		got = append(got, span{f.Kind, f.Target, float64(f.Start-t0) / 1e6, float64(f.End-t0) / 1e6})
	}
	assert.Equal(t, []span{
		{"pause", "c1", 10, 20},
		{"pause", "redis-0", 30, 70}, // never resumed: to the end of the history
		{"kill", "c2", 40, 50},
		{"kill", "c0", 60, 60},
		{"partition", "redis-1", 62, 65},
		{"partition", "redis-2", 66, 70}, // never healed: to the end of the history
	}, got)
	assert.Equal(t, Interval{Start: at(0), End: at(70)}, r.Span)
}

func TestEmptyHistory(t *testing.T) {
	h := &history.History{Header: history.Header{Version: 1, StartTime: 42}}
	r := Check(h, nil, Options{})
	// A header-only history tested nothing: unknown, never true.
	assert.Equal(t, Unknown, r.Valid)
	assert.Equal(t, Interval{Start: 42, End: 42}, r.Span)
	assert.Equal(t, "No safety check failed, but the verdict is unknown: The history holds no acquire, read or write, so nothing was tested.", r.Reason)
	assert.False(t, r.Checks.Fencing.Checked)
	assert.Equal(t, StateSkipped, r.Checks.Fencing.State)
}

// TestResultsJSON pins the keys results.json promises.
func TestResultsJSON(t *testing.T) {
	b, err := json.Marshal(check(t, pausedHolder("unfenced")))
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Equal(t, false, got["valid"])
	checks := got["checks"].(map[string]any)
	want := map[string][]string{
		"lease_safety":     {"valid", "violations"},
		"double_ownership": {"windows", "total_ms", "max_ms", "unsafe_writes"},
		"resource":         {"valid", "lost_updates", "stale_writes_accepted", "stale_writes_refused"},
		"fencing":          {"valid", "regressions", "duplicates"},
		"linearizability":  {"result"},
		"liveness":         {"grants", "longest_stall_ms"},
	}
	for check, keys := range want {
		c, ok := checks[check].(map[string]any)
		require.True(t, ok, check)
		for _, k := range keys {
			assert.Contains(t, c, k, check)
		}
	}
	assert.Equal(t, "illegal", checks["linearizability"].(map[string]any)["result"])
}

func TestReasonOfANonLinearizableRead(t *testing.T) {
	b := newBuilder("fenced").Cycle(0, 0, 0, 1, "").Acquire(1, 10, 11, 2).Read(1, 12, 13, 0).Release(1, 14, 15)
	r := check(t, b)
	assert.Equal(t, Invalid, r.Valid)
	assert.Equal(t, "the read-modify-write history is not linearizable: segment 1 of 1 on lock-0 "+
		"(2 operations, 0.00s to 0.01s) has no linearization.", r.Reason)
}
