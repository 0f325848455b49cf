package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
)

// foreignViolation is a history another program wrote of a lock lockcheck
// does not have: c1 is granted lock-0 while c0's lease is certainly live.
const foreignViolation = `{"lockcheck_history": 1, "config": {"backend": "my-lock", "workload": "unfenced", "ttl_ms": 1000}}
{"index": 0, "time": 1000000000, "process": 0, "type": "invoke", "f": "acquire", "key": "lock-0"}
{"index": 1, "time": 1001000000, "process": 0, "type": "ok", "f": "acquire", "key": "lock-0", "value": {"token": "a", "ttl_ms": 1000}}
{"index": 2, "time": 1002000000, "process": 1, "type": "invoke", "f": "acquire", "key": "lock-0"}
{"index": 3, "time": 1003000000, "process": 1, "type": "ok", "f": "acquire", "key": "lock-0", "value": {"token": "b", "ttl_ms": 1000}}
{"index": 4, "time": 1004000000, "process": 0, "type": "invoke", "f": "release", "key": "lock-0", "value": {"token": "a"}}
{"index": 5, "time": 1005000000, "process": 0, "type": "ok", "f": "release", "key": "lock-0", "value": {"accepted": true}}
{"index": 6, "time": 1006000000, "process": 1, "type": "invoke", "f": "release", "key": "lock-0", "value": {"token": "b"}}
{"index": 7, "time": 1007000000, "process": 1, "type": "ok", "f": "release", "key": "lock-0", "value": {"accepted": true}}
{"index": 8, "time": 1008000000, "process": "nemesis", "type": "info", "f": "run-end", "value": {}}
`

// A false verdict of a history from another program, of a backend this
// lockcheck cannot run, writes no repro.yaml (no scenario can rerun it) and
// prints no warning about it.
func TestCheckForeignHistoryWritesNoRepro(t *testing.T) {
	testtier.Long(t)
	dir := filepath.Join(t.TempDir(), "myrun")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, results.HistoryFile), []byte(foreignViolation), 0o644))
	cmd, stdout, stderr := lockcheckProcess(t, "check", dir)
	err := cmd.Wait()
	require.Error(t, err, "the verdict is false: exit 1")
	assert.Equal(t, exitInvalid, cmd.ProcessState.ExitCode(), "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout.String(), "verdict: false")
	assert.Empty(t, stderr.String(), "nothing to warn about")
	assert.NoFileExists(t, filepath.Join(dir, results.ReproFile))
	assert.NotContains(t, stdout.String(), "repro:")
}

// docs/history.md and docs/history.schema.json document every nemesis verb
// and every value field a hand-written history with nemesis steps uses,
// landing events included.
func TestHistoryDocNamesEveryNemesisVerb(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "history.md"))
	require.NoError(t, err)
	_, rules, found := strings.Cut(string(doc), "The nemesis records only `info` events. Its verbs are ")
	require.True(t, found, "docs/history.md lists the nemesis verbs")
	verbList, _, _ := strings.Cut(rules, "\n")
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "history.schema.json"))
	require.NoError(t, err)
	var schema struct {
		Defs map[string]struct {
			Properties map[string]struct {
				Description string         `json:"description"`
				Properties  map[string]any `json:"properties"`
			} `json:"properties"`
		} `json:"$defs"`
	}
	require.NoError(t, json.Unmarshal(raw, &schema))
	nemesisEvent := schema.Defs["nemesisEvent"]
	schemaVerbs := nemesisEvent.Properties["f"].Description
	valueFields := schema.Defs["value"].Properties

	history := []string{
		`{"index": 0, "time": 1000000000, "process": "nemesis", "type": "info", "f": "pause", "value": {"target": "n1", "duration_ms": 1000, "step": 1}}`,
		`{"index": 1, "time": 1500000000, "process": "nemesis", "type": "info", "f": "resume", "value": {"target": "n1", "step": 1}}`,
		`{"index": 2, "time": 1500000001, "process": "nemesis", "type": "info", "f": "landing", "value": {"step": 1, "fault": "pause-node", "landed": false, "detail": "n1 was stopped 500ms of the 1s asked"}}`,
		`{"index": 3, "time": 1600000000, "process": "nemesis", "type": "info", "f": "kill-session", "value": {"target": "c0", "session": "pg-0/4711", "step": 2}}`,
		`{"index": 4, "time": 1700000000, "process": "nemesis", "type": "info", "f": "cut-replicas", "value": {"target": "n1", "step": 3}}`,
		`{"index": 5, "time": 1750000000, "process": "nemesis", "type": "info", "f": "client-violation", "value": {"target": "c0", "rule": "every stdout line is valid UTF-8", "detail": "a line that is not valid UTF-8"}}`,
		`{"index": 6, "time": 1800000000, "process": "nemesis", "type": "info", "f": "run-end", "value": {}}`,
	}
	for _, line := range history {
		var e struct {
			F     string         `json:"f"`
			Value map[string]any `json:"value"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &e))
		assert.Contains(t, verbList, "`"+e.F+"`", "docs/history.md names the verb %s", e.F)
		assert.Contains(t, schemaVerbs, e.F, "the schema names the verb %s", e.F)
		for field := range e.Value {
			assert.Contains(t, valueFields, field, "the schema has value.%s", field)
		}
	}
}
