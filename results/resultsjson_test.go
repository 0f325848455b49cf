package results

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
)

// contract is results.json's promise from issue 2: these keys, forever.
var contract = map[string][]string{
	"lease_safety":     {"valid", "violations"},
	"double_ownership": {"windows", "total_ms", "max_ms", "unsafe_writes"},
	"resource":         {"valid", "lost_updates", "stale_writes_accepted", "stale_writes_refused"},
	"fencing":          {"valid", "regressions", "duplicates"},
	"linearizability":  {"result"},
	"liveness":         {"grants", "longest_stall_ms"},
}

func TestResultsJSONContract(t *testing.T) {
	dir := t.TempDir()
	h := sampleHistory(plain, "unfenced")
	require.NoError(t, WriteAll(dir, h, badResult(plain)))

	b, err := os.ReadFile(filepath.Join(dir, ResultsFile))
	require.NoError(t, err)
	var top map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &top))
	for _, key := range []string{"valid", "backend", "variant", "workload", "nemesis", "seed", "checks",
		"reason", "config", "history_events", "faults", "schema"} {
		assert.Contains(t, top, key)
	}
	assert.JSONEq(t, `false`, string(top["valid"]))
	assert.JSONEq(t, `"redis"`, string(top["backend"]))
	assert.JSONEq(t, `"correct"`, string(top["variant"]))
	assert.JSONEq(t, `"unfenced"`, string(top["workload"]))
	assert.JSONEq(t, `["pause-holder"]`, string(top["nemesis"]))
	assert.JSONEq(t, `1`, string(top["seed"]))
	assert.JSONEq(t, `1`, string(top["schema"]))
	assert.JSONEq(t, `24`, string(top["history_events"]))
	// The build that wrote it: go test records no VCS information, so the
	// revision is "unknown" here and modified null, never a guess.
	var build map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(top["lockcheck"], &build))
	assert.ElementsMatch(t, []string{"version", "revision", "modified", "go"}, slices.Collect(maps.Keys(build)))
	assert.JSONEq(t, `"`+runtime.Version()+`"`, string(build["go"]))

	var checks map[string]map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(top["checks"], &checks))
	for check, keys := range contract {
		require.Contains(t, checks, check)
		for _, key := range keys {
			assert.Contains(t, checks[check], key, "checks.%s.%s", check, key)
		}
	}
	assert.JSONEq(t, `"unknown"`, string(checks["linearizability"]["result"]))
	assert.JSONEq(t, `1`, string(checks["resource"]["lost_updates"]))

	got, err := ReadResults(dir)
	require.NoError(t, err)
	assert.Equal(t, newResults(h, badResult(plain)), got, "results.json round-trips")

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.HasSuffix(e.Name(), ".tmp"), "temporary file %s left behind", e.Name())
	}
}

func TestResultsJSONEmptyListsAreArrays(t *testing.T) {
	dir := t.TempDir()
	h := sampleHistory(plain, "fenced")
	h.Header.Config.Nemesis = nil
	res := goodResult()
	res.Valid = checker.Unknown
	require.NoError(t, WriteAll(dir, h, res))

	var top map[string]json.RawMessage
	b, err := os.ReadFile(filepath.Join(dir, ResultsFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &top))
	assert.JSONEq(t, `[]`, string(top["nemesis"]))
	assert.JSONEq(t, `[]`, string(top["faults"]))
	assert.JSONEq(t, `"unknown"`, string(top["valid"]))
}

func TestReadResultsErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadResults(dir)
	assert.ErrorContains(t, err, "read results")

	require.NoError(t, os.WriteFile(filepath.Join(dir, ResultsFile), []byte(`{"valid": true}`), 0o644))
	_, err = ReadResults(dir)
	assert.ErrorContains(t, err, "not a lockcheck results file")
}
