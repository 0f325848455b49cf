package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/results"
)

// runDirWith writes a run directory holding the given files.
func runDirWith(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	return dir
}

// fixture copies a hand-written history of testdata into a fresh run
// directory (check writes its results next to it).
func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name, results.HistoryFile))
	require.NoError(t, err)
	return runDirWith(t, map[string]string{results.HistoryFile: string(b)})
}

// TestCheckHandWrittenHistories checks histories lockcheck did not write.
func TestCheckHandWrittenHistories(t *testing.T) {
	tests := []struct {
		name    string
		code    int
		verdict checker.Validity
	}{
		// A linearizable lock whose holder asks for it again while holding
		// (refused, and once granted re-entrantly) and releases after.
		{"reentrant-linearizable", exitValid, checker.Valid},
		// The holder's release failed; another client is granted the lock
		// inside the lease that release left live.
		{"grant-in-failed-release", exitInvalid, checker.Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := fixture(t, tt.name)
			inv := lockcheck("check", dir)
			assert.Equal(t, tt.code, inv.code, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
			res, err := results.ReadResults(dir)
			require.NoError(t, err)
			assert.Equal(t, tt.verdict, res.Valid)
		})
	}
}

const modelHeader = `{"lockcheck_history":1,"start_time":0,"config":{"backend":"hand-written","workload":"unfenced","nemesis":[],"seed":0,"clients":2,"keys":1,"ttl_ms":100,"time_limit_ms":0}}`

// TestCheckRefusesWhatTheModelRefuses: each malformed class is one line
// naming the file, the line and the rule, and exit 2.
func TestCheckRefusesWhatTheModelRefuses(t *testing.T) {
	acquire := `{"index":0,"time":10,"process":0,"type":"invoke","f":"acquire","key":"k"}`
	granted := `{"index":1,"time":20,"process":0,"type":"ok","f":"acquire","key":"k","value":{"ttl_ms":100}}`
	history := func(lines ...string) string { return modelHeader + "\n" + strings.Join(lines, "\n") + "\n" }
	tests := []struct {
		name, history, want string
	}{
		{"misspelled f", history(`{"index":0,"time":10,"process":0,"type":"invoke","f":"aquire","key":"k"}`), `history.jsonl line 2: unknown f "aquire"`},
		{"unknown type", history(acquire, `{"index":1,"time":20,"process":0,"type":"done","f":"acquire","key":"k"}`), `history.jsonl line 3: unknown type "done"`},
		{"missing time", history(`{"index":0,"process":0,"type":"invoke","f":"acquire","key":"k"}`), `history.jsonl line 2: missing "time"`},
		{"missing process", history(`{"index":0,"time":10,"type":"invoke","f":"acquire","key":"k"}`), `history.jsonl line 2: missing "process"`},
		{"missing type", history(`{"index":0,"time":10,"process":0,"f":"acquire","key":"k"}`), `history.jsonl line 2: missing "type"`},
		{"completion before its invoke", history(acquire, `{"index":1,"time":5,"process":0,"type":"ok","f":"acquire","key":"k"}`), "history.jsonl line 3: ok of acquire by process 0 at time 5 is before its invoke"},
		{"two completions", history(acquire, granted, `{"index":2,"time":30,"process":0,"type":"ok","f":"acquire","key":"k"}`), "history.jsonl line 4: ok of acquire by process 0 has no pending invoke"},
		{"retired process acts", history(acquire, `{"index":1,"time":20,"process":0,"type":"info","f":"acquire","key":"k"}`,
			`{"index":2,"time":30,"process":0,"type":"invoke","f":"release","key":"k"}`), "history.jsonl line 4: process 0 acts after its operation completed with info"},
		{"duplicate index", history(acquire, `{"index":0,"time":20,"process":1,"type":"invoke","f":"acquire","key":"k"}`), "history.jsonl line 3: duplicate index 0"},
		{"a line over 1 MiB", history(acquire, granted+strings.Repeat(" ", 1<<20)), "history.jsonl line 3: over 1048576 bytes (1 MiB), the longest line a history or resource log may hold (docs/history.md); cut the file before this line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := runDirWith(t, map[string]string{results.HistoryFile: tt.history})
			inv := lockcheck("check", dir)
			assert.Equal(t, exitUnknown, inv.code)
			assert.Contains(t, inv.stderr, filepath.Join(dir, tt.want))
			assert.Equal(t, 1, strings.Count(strings.TrimSpace(inv.stderr), "\n")+1, "one line: %q", inv.stderr)
			_, err := os.Stat(filepath.Join(dir, results.ResultsFile))
			assert.ErrorIs(t, err, os.ErrNotExist, "no verdict is drawn from refused input")
		})
	}
}

// TestCheckToleratesCutOffLastLines: a killed run leaves the last line of
// either file half-written; the prefix is checked and the cut is noted. A
// resource log's cut line may have been a write that landed, which no
// check can judge: the resource check is then unknown, never true.
func TestCheckToleratesCutOffLastLines(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "reentrant-linearizable", results.HistoryFile))
	require.NoError(t, err)
	full := string(b)
	resource := `{"seq":1,"time":1009000000,"key":"orders","process":0,"req":"r1","read":0,"value":1,"prev":0,"accepted":true}` + "\n" +
		`{"seq":2,"time":1021000000,"key":"orders","process":1,"req":"r2","read":1,"value":2,"prev":1,"accepted":true}` + "\n"
	tests := []struct {
		name               string
		history, resource  string
		historyCut, resCut bool
		exit               int
	}{
		{"both whole", full, resource, false, false, exitValid},
		{"history cut", full + `{"index":24,"time":1024000000,"pro`, resource, true, false, exitValid},
		{"resource log cut", full, resource + `{"seq":3,"time":10`, false, true, exitUnknown},
		{"both cut", full + `{"index":24,"ti`, resource + `{"seq":3,"ti`, true, true, exitUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := runDirWith(t, map[string]string{results.HistoryFile: tt.history, results.ResourceFile: tt.resource})
			inv := lockcheck("check", dir)
			assert.Equal(t, tt.exit, inv.code, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
			res, err := results.ReadResults(dir)
			require.NoError(t, err)
			assert.Equal(t, checker.Truncated{History: tt.historyCut, Resource: tt.resCut}, res.Truncated)
			assert.Equal(t, checker.SourceResourceLog, res.Checks.Resource.Source)
			if tt.resCut {
				assert.Equal(t, checker.StateUnknown, res.Checks.Resource.State)
				assert.Contains(t, res.Checks.Resource.StateReason, "the resource log's last line is cut off (it holds 2 accepted writes; the history accepted 2)")
			}
		})
	}
}
