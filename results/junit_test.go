package results

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
)

// junitOutcomes renders junit.xml and reads back how each test case ended.
func junitOutcomes(t *testing.T, workload string, res *checker.Result) (junitSuites, map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, writeJUnit(&buf, sampleHistory(plain, workload), res))
	var doc junitSuites
	require.NoError(t, xml.Unmarshal(buf.Bytes(), &doc))
	require.Len(t, doc.Suites, 1)
	got := map[string]string{}
	for _, tc := range doc.Suites[0].Cases {
		switch {
		case tc.Failure != nil:
			got[tc.Name] = "failure"
		case tc.Error != nil:
			got[tc.Name] = "error"
		case tc.Skipped != nil:
			got[tc.Name] = "skipped"
		default:
			got[tc.Name] = "pass"
		}
	}
	return doc, got
}

func TestJUnitOutcomes(t *testing.T) {
	allPass := map[string]string{"lease_safety": "pass", "double_ownership": "pass", "resource": "pass",
		"fencing": "pass", "linearizability": "pass", "liveness": "pass"}
	with := func(changes map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range allPass {
			out[k] = v
		}
		for k, v := range changes {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		workload string
		mutate   func(*checker.Result)
		want     map[string]string
	}{
		{"all good", "unfenced", func(*checker.Result) {}, allPass},
		{"lease violation", "fenced", func(r *checker.Result) {
			r.Valid = checker.Invalid
			r.Checks.LeaseSafety = checker.LeaseSafety{Violations: 1}
		}, with(map[string]string{"lease_safety": "failure"})},
		{"unfenced overlap with accepted writes fails", "unfenced", func(r *checker.Result) {
			r.Valid = checker.Invalid
			r.Checks.DoubleOwnership = checker.DoubleOwnership{Windows: 2, UnsafeWrites: 3}
		}, with(map[string]string{"double_ownership": "failure"})},
		{"fenced overlap passes", "fenced", func(r *checker.Result) {
			r.Checks.DoubleOwnership = checker.DoubleOwnership{Windows: 2, UnsafeWrites: 3}
		}, allPass},
		{"unfenced overlap without writes passes", "unfenced", func(r *checker.Result) {
			r.Checks.DoubleOwnership = checker.DoubleOwnership{Windows: 2}
		}, allPass},
		{"lost update", "unfenced", func(r *checker.Result) {
			r.Valid = checker.Invalid
			r.Checks.Resource = checker.ResourceSafety{LostUpdates: 1}
		}, with(map[string]string{"resource": "failure"})},
		{"refused stale writes pass", "fenced", func(r *checker.Result) {
			r.Checks.Resource.StaleWritesRefused = 4
		}, allPass},
		{"fence regression", "fenced", func(r *checker.Result) {
			r.Valid = checker.Invalid
			r.Checks.Fencing = checker.Fencing{Regressions: 1, Checked: true}
		}, with(map[string]string{"fencing": "failure"})},
		{"no fences", "unfenced", func(r *checker.Result) {
			r.Checks.Fencing = checker.Fencing{Valid: true}
		}, with(map[string]string{"fencing": "skipped"})},
		{"not linearizable", "unfenced", func(r *checker.Result) {
			r.Valid = checker.Invalid
			r.Checks.Linearizability.Result = "illegal"
		}, with(map[string]string{"linearizability": "failure"})},
		{"linearizability unknown is an error", "unfenced", func(r *checker.Result) {
			r.Valid = checker.Unknown
			r.Checks.Linearizability.Result = "unknown"
		}, with(map[string]string{"linearizability": "error"})},
		{"missing linearizability result is an error", "unfenced", func(r *checker.Result) {
			r.Valid = checker.Unknown
			r.Checks.Linearizability.Result = ""
		}, with(map[string]string{"linearizability": "error"})},
		{"an orphaned lock fails", "unfenced", func(r *checker.Result) {
			r.Valid = checker.Invalid
			r.Checks.Liveness.StuckUntilEnd, r.Checks.Liveness.Orphaned = true, 1
		}, with(map[string]string{"liveness": "failure"})},
		{"a verdict no check explains still fails", "unfenced", func(r *checker.Result) {
			r.Valid = checker.Invalid
		}, with(map[string]string{"verdict": "failure"})},
		{"an unknown verdict no check explains is an error", "unfenced", func(r *checker.Result) {
			r.Valid = checker.Unknown
		}, with(map[string]string{"verdict": "error"})},
		{"an interrupted run is an error", "unfenced", func(r *checker.Result) {
			r.Valid, r.Interrupted = checker.Unknown, true
		}, with(map[string]string{"run": "error"})},
		{"an incomplete run is an error", "unfenced", func(r *checker.Result) {
			r.Valid, r.Incomplete = checker.Unknown, true
		}, with(map[string]string{"run": "error"})},
		{"an interrupted run with a failed check fails", "unfenced", func(r *checker.Result) {
			r.Valid, r.Interrupted = checker.Invalid, true
			r.Checks.LeaseSafety = checker.LeaseSafety{Violations: 1}
		}, with(map[string]string{"lease_safety": "failure", "run": "failure"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := goodResult()
			tc.mutate(res)
			doc, got := junitOutcomes(t, tc.workload, res)
			assert.Equal(t, tc.want, got)
			count := func(outcome string) (n int) {
				for _, o := range got {
					if o == outcome {
						n++
					}
				}
				return n
			}
			suite := doc.Suites[0]
			assert.Equal(t, len(got), suite.Tests)
			assert.Equal(t, count("failure"), suite.Failures)
			assert.Equal(t, count("error"), suite.Errors)
			assert.Equal(t, count("skipped"), suite.Skipped)
			assert.Equal(t, suite.Failures, doc.Failures)
		})
	}
}

func TestJUnitSuiteAndMessages(t *testing.T) {
	doc, _ := junitOutcomes(t, "unfenced", badResult(plain))
	suite := doc.Suites[0]
	assert.Equal(t, "lockcheck redis/correct/unfenced pause-holder", suite.Name)
	byName := map[string]junitCase{}
	for _, tc := range suite.Cases {
		byName[tc.Name] = tc
	}
	lost := byName["resource"].Failure
	require.NotNil(t, lost)
	assert.Equal(t, "The protected resource was corrupted: 1 lost update and 0 stale writes accepted.", lost.Message)
	assert.Contains(t, lost.Details, `lost-update on key "lock" at 0.802 s by c0: read 0, resource held 2, wrote 1`)
	assert.NotContains(t, lost.Details, "stale-write-refused", "a refused write is not corruption")
	assert.Contains(t, byName["double_ownership"].Failure.Message, "accepted 1 write from them")
	orphaned := byName["liveness"].Failure
	require.NotNil(t, orphaned)
	assert.Equal(t, "The lock was orphaned: nobody held lock from 1.00s to the end of the run: c3 died holding it with no TTL: i/o timeout.", orphaned.Message)
	assert.Contains(t, orphaned.Details, `key "lock" orphaned from 1.000 s to the end of the run: 12 acquires refused while nobody held it`)
}

func TestJUnitEscapes(t *testing.T) {
	var buf bytes.Buffer
	evil := hostile{key: xss, target: xss, errText: xss}
	require.NoError(t, writeJUnit(&buf, sampleHistory(evil, "unfenced"), badResult(evil)))
	out := buf.String()
	assert.NotContains(t, out, "<script")
	assert.Contains(t, out, "&lt;script&gt;alert(1)&lt;/script&gt;")
	assert.True(t, strings.HasPrefix(out, "<?xml"))
}
