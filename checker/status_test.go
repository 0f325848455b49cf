package checker

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJudge: each check decides its status once; the verdict reads it.
func TestJudge(t *testing.T) {
	unfenced, fenced := JudgeContext{}, JudgeContext{Fenced: true}
	tests := []struct {
		name    string
		check   CheckResult
		ctx     JudgeContext
		status  Status
		message string
	}{
		{"lease ok", &LeaseSafety{Valid: true}, unfenced, StatusOK, ""},
		{"lease violated", &LeaseSafety{Violations: 2}, unfenced, StatusFailed, "(2 violations)"},
		{"no overlap", &DoubleOwnership{}, unfenced, StatusOK, ""},
		{"overlap with landed writes, unfenced", &DoubleOwnership{Windows: 1, UnsafeWrites: 3}, unfenced, StatusFailed, "accepted 3 writes"},
		{"overlap with landed writes, fenced", &DoubleOwnership{Windows: 1, UnsafeWrites: 3}, fenced, StatusNotice, "the fenced resource is what keeps this safe"},
		{"overlap without writes", &DoubleOwnership{Windows: 1}, unfenced, StatusNotice, "neither wrote inside the overlap"},
		{"resource ok", &ResourceSafety{Valid: true, StaleWritesRefused: 4}, unfenced, StatusOK, ""},
		{"lost update", &ResourceSafety{LostUpdates: 1}, unfenced, StatusFailed, "1 lost update and 0 stale writes accepted"},
		{"fences rose", &Fencing{Valid: true, Checked: true}, unfenced, StatusOK, ""},
		{"no fences", &Fencing{Valid: true}, unfenced, StatusSkipped, "not checked"},
		{"fence regression", &Fencing{Regressions: 1, Checked: true}, unfenced, StatusFailed, "1 regression, 0 duplicates"},
		{"INCR after failover", &Fencing{Duplicates: 1, Checked: true, Anomalies: []FenceAnomaly{{Cause: "failover"}}}, unfenced, StatusFailed, "INCR after failover"},
		{"linearizable", &Linearizability{Result: Linearizable}, unfenced, StatusOK, ""},
		{"not linearizable", &Linearizability{Result: NotLinearizable}, unfenced, StatusFailed, "not linearizable"},
		{"linearizability unknown", &Linearizability{Result: LinearizabilityUnknown}, unfenced, StatusUnknown, "unknown, not a pass"},
		{"no linearizability result", &Linearizability{}, unfenced, StatusUnknown, "unknown, not a pass"},
		{"live", &Liveness{Grants: 3}, unfenced, StatusOK, ""},
		{"a long stall", &Liveness{Stall: &Interval{Start: 2e9}, StallReason: "c3 died holding it."}, JudgeContext{T0: 1e9}, StatusOK, ""},
		{"orphaned", &Liveness{Orphaned: 2, StuckUntilEnd: true, Orphans: []Orphan{{Reason: "nobody held lock-0 from 1.00s to the end of the run"}}}, unfenced, StatusFailed,
			"The lock was orphaned: nobody held lock-0 from 1.00s to the end of the run (2 orphaned stretches in all)."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := tt.check.Judge(tt.ctx)
			assert.Equal(t, tt.status, j.Status)
			assert.Contains(t, j.Message, tt.message)
			if tt.status == StatusOK {
				assert.Empty(t, j.Message)
			}
		})
	}
}

// TestListNamesEveryCheckOnce: the list is results.json's checks, every
// one of them, in order; a check added to Checks but not to List fails it.
func TestListNamesEveryCheckOnce(t *testing.T) {
	var c Checks
	var keys []string
	for _, n := range c.List() {
		keys = append(keys, n.Key)
	}
	assert.Equal(t, []string{"lease_safety", "double_ownership", "resource", "fencing", "linearizability", "liveness"}, keys)
	raw, err := json.Marshal(c)
	require.NoError(t, err)
	var inJSON map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &inJSON))
	assert.ElementsMatch(t, slices.Collect(maps.Keys(inJSON)), keys)
}

func TestValidityIsAWord(t *testing.T) {
	for v, word := range map[Validity]string{Valid: "true", Invalid: "false", Unknown: "unknown"} {
		assert.Equal(t, word, v.String())
		b, err := v.MarshalJSON()
		require.NoError(t, err)
		if v == Unknown {
			word = `"unknown"` // results.json's contract
		}
		assert.Equal(t, word, string(b))
	}
}

// TestListIsEveryCheck: List names every field of Checks, in its order, by
// its key in results.json.
func TestListIsEveryCheck(t *testing.T) {
	var c Checks
	typ := reflect.TypeOf(c)
	list := c.List()
	require.Len(t, list, typ.NumField(), "a line in List for every check")
	for i, nc := range list {
		key, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		assert.Equal(t, key, nc.Key, "List follows the fields of Checks")
		assert.Equal(t, reflect.ValueOf(&c).Elem().Field(i).Addr().Interface(), nc.Check, "%s is its own field", nc.Key)
	}
}
