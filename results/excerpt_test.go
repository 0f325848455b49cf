package results

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// writeHistory writes h as a history file into dir.
func writeHistory(t *testing.T, dir string, h *history.History) {
	f, err := os.Create(filepath.Join(dir, HistoryFile))
	require.NoError(t, err)
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	require.NoError(t, enc.Encode(h.Header))
	for _, e := range h.Events {
		require.NoError(t, enc.Encode(e))
	}
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())
}

// TestCheckDirExcerptsALongHistory: a history over excerptBytes is checked
// as it is read, with the verdict and counts of the whole history, and its
// report is drawn from an excerpt that says so.
func TestCheckDirExcerptsALongHistory(t *testing.T) {
	prev := excerptBytes
	t.Cleanup(func() { excerptBytes = prev })
	excerptBytes = 1 << 10

	h := lockCycles(2, 20_000, 200e9)
	h.Events = append(h.Events, history.Event{Index: int64(len(h.Events)), Time: h.Events[len(h.Events)-1].Time + 1,
		Process: history.Nemesis, Type: history.Info, F: history.NemRunEnd})
	dir := t.TempDir()
	writeHistory(t, dir, h)
	got, res, err := CheckDir(dir, checker.Options{})
	require.NoError(t, err)
	assert.Equal(t, checker.Check(h, nil, checker.Options{}), res, "the verdict and counts of the whole history")
	require.NotNil(t, got.Excerpt)
	assert.Equal(t, len(h.Events), got.Length())
	assert.Less(t, len(got.Events), len(h.Events)/10, "the timeline draws the stretch around the findings")
	assert.Greater(t, got.Excerpt.Stride, 1, "the latency figures sample the operations")

	var written Results
	b, err := os.ReadFile(filepath.Join(dir, ResultsFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &written))
	assert.Equal(t, len(h.Events), written.HistoryEvents)
	page, err := os.ReadFile(filepath.Join(dir, ReportFile))
	require.NoError(t, err)
	assert.Contains(t, string(page), "a long history: the timeline draws")
	assert.Contains(t, string(page), "these figures are drawn from one operation in")
}
