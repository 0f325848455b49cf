package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/results"
)

// The example history of docs/history.md's "Recording a history from
// another program" is checked as the page says, so that the page cannot
// drift from what lockcheck check accepts.
func TestHistoryDocExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "history.md"))
	require.NoError(t, err)
	_, section, found := strings.Cut(string(doc), "\n## Recording a history from another program\n")
	require.True(t, found, "the section is gone from docs/history.md")
	_, block, found := strings.Cut(section, "```jsonl\n")
	require.True(t, found, "the section has no jsonl example")
	example, _, found := strings.Cut(block, "```")
	require.True(t, found)

	dir := filepath.Join(t.TempDir(), "myrun")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, results.HistoryFile), []byte(example), 0o644))
	inv := lockcheck("check", dir)
	require.Equal(t, exitValid, inv.code, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
	res, err := results.ReadResults(dir)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Checks.Liveness.Grants, "both grants were read")
	assert.Zero(t, res.Checks.Resource.LostUpdates)
	assert.False(t, res.Incomplete, "the example ends with run-end")
}
