package results

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
)

// comparisonWithRuns writes two real run directories into a comparison
// folder and returns a comparison of them plus a skipped and a failed cell.
func comparisonWithRuns(t *testing.T) (string, *Comparison) {
	dir := t.TempDir()
	_, good := writeRun(t, dir, "run-fenced", lockCycles(3, 60, 3e9))
	_, bad := writeRun(t, dir, "run-unfenced", storyHistory(plain))
	ran := func(c Cell, res *checker.Result, runDir string) Cell {
		c.Dir = runDir
		c.Ran(&Results{Valid: res.Valid, Reason: res.Reason, Checks: res.Checks})
		return c
	}
	return dir, &Comparison{Started: "2025-01-02T04:00:00Z", TimeLimitMs: 15_000, Seed: 3,
		CommandLine: []string{"lockcheck", "compare", "--time-limit", "15s"},
		Cells: []Cell{
			ran(Cell{Backend: "redis", Variant: "correct", Workload: "fenced", Nemesis: []string{"pause-holder"}}, good, "run-fenced"),
			ran(Cell{Backend: "redis", Variant: "correct", Workload: "unfenced", Nemesis: []string{"pause-holder"}}, bad, "run-unfenced"),
			{Backend: "redis", Variant: "correct", Workload: "fenced", Nemesis: []string{"kill-client"}, Status: CellSkipped, Why: "no failpoint " + xss},
			{Backend: "etcd", Variant: "mutex", Workload: "fenced", Nemesis: []string{"pause-holder"}, Status: CellError, Why: "etcd did not start " + xss},
		}}
}

func TestWriteComparison(t *testing.T) {
	dir, cmp := comparisonWithRuns(t)
	require.NoError(t, WriteComparison(dir, cmp))

	back, err := ReadComparison(dir)
	require.NoError(t, err)
	assert.Equal(t, CompareSchema, back.Schema)
	assert.Equal(t, cmp.Cells, back.Cells, "compare.json keeps every cell")
	require.NotNil(t, back.Cells[1].Counts)
	assert.Equal(t, 1, back.Cells[1].Counts.LostUpdates)

	raw, err := os.ReadFile(filepath.Join(dir, JUnitFile))
	require.NoError(t, err)
	var doc junitSuites
	require.NoError(t, xml.Unmarshal(raw, &doc))
	require.Len(t, doc.Suites, 4, "a suite per cell")
	assert.Equal(t, "lockcheck redis/correct/unfenced pause-holder", doc.Suites[1].Name)
	assert.Equal(t, 6, doc.Suites[0].Tests, "a case per check of a cell that ran")
	var failed []string
	for _, c := range doc.Suites[1].Cases {
		if c.Failure != nil {
			failed = append(failed, c.Name)
		}
	}
	assert.Contains(t, failed, "resource", "the unfenced cell's lost update fails its resource case")
	assert.NotNil(t, doc.Suites[2].Cases[0].Skipped)
	assert.Contains(t, doc.Suites[2].Cases[0].Skipped.Message, "no failpoint")
	assert.NotNil(t, doc.Suites[3].Cases[0].Error)
	assert.Equal(t, 1, doc.Skipped)
	assert.Equal(t, 1, doc.Errors)
	assert.GreaterOrEqual(t, doc.Failures, 2)

	page, err := os.ReadFile(filepath.Join(dir, CompareReport))
	require.NoError(t, err)
	html := string(page)
	assert.NotContains(t, html, "<script", "no script on the page, and none injected")
	assert.Contains(t, html, "etcd did not start &lt;script&gt;")
	assert.Contains(t, html, `<a href="run-unfenced/report.html"><span class="badge fail">false</span></a>`)
	assert.Contains(t, html, `<a href="run-fenced/report.html"><span class="badge pass">true</span></a>`)
	assert.Contains(t, html, "4 cells: 1 true, 1 false, 1 skipped, 1 error.")
	assert.Contains(t, html, "<li>redis/correct, unfenced: unsafe under pause-holder.</li>")
}

func TestWriteComparisonWithoutCellsYet(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteComparison(dir, &Comparison{Started: "2025-01-02T04:00:00Z"}))
	back, err := ReadComparison(dir)
	require.NoError(t, err)
	assert.Empty(t, back.Cells)
	page, err := os.ReadFile(filepath.Join(dir, CompareReport))
	require.NoError(t, err)
	assert.Contains(t, string(page), "still running")
}

func TestConclusions(t *testing.T) {
	cell := func(word string) *cellView { return &cellView{Word: word} }
	rows := func(cells ...[2]any) backendRows {
		b := backendRows{Name: "redis/correct"}
		for _, c := range cells {
			b.Rows = append(b.Rows, faultRow{Faults: c[0].(string), Cells: []*cellView{c[1].(*cellView)}})
		}
		return b
	}
	for _, tc := range []struct {
		name string
		b    backendRows
		want string
	}{
		{"safe", rows([2]any{"none", cell("true")}, [2]any{"pause-holder", cell("true")}),
			"redis/correct, fenced: safe under every fault tried (none and pause-holder)."},
		{"unsafe", rows([2]any{"none", cell("true")}, [2]any{"pause-holder", cell("false")}),
			"redis/correct, fenced: unsafe under pause-holder; safe under none."},
		{"undecided", rows([2]any{"none", cell("true")}, [2]any{"pause-holder", cell("unknown")}),
			"redis/correct, fenced: no violation found, but no verdict under pause-holder."},
		{"all skipped", rows([2]any{"kill-client", cell("skipped")}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(conclusions([]backendRows{tc.b}, []string{"fenced"}), "")
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestShortCounts(t *testing.T) {
	for _, tc := range []struct {
		counts CellCounts
		want   string
	}{
		{CellCounts{Linearizability: "ok", GrantsPerSec: 41.6}, "no anomaly; 42 grants/s"},
		{CellCounts{LeaseViolations: 1, LostUpdates: 3, FenceAnomalies: 2, Linearizability: "illegal", GrantsPerSec: 9},
			"1 lease violation, 3 lost updates, 2 fence anomalies, linearizability illegal; 9 grants/s"},
		{CellCounts{Windows: 1, StaleWritesRefused: 1, StuckUntilEnd: true, Linearizability: "ok"},
			"1 double-ownership window, 1 stale write refused, stuck; 0 grants/s"},
	} {
		assert.Equal(t, tc.want, shortCounts(&tc.counts))
	}
}
