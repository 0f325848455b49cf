package results

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A sweep's page as a person looks at it: a heatmap per backend and
// workload coloured by the share of false seeds, the frontier, the
// decision table and the quantiles drawn from; a cell's link opens its
// run's report. Hostile text in the command line and a skipped cell's
// reason runs nowhere.
func TestSweepInBrowser(t *testing.T) {
	chromium(t)
	root := t.TempDir()
	dir := filepath.Join(root, "20250102-050000"+SweepSuffix)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	runs := pauseSweep()
	for i := range runs {
		runs[i].Settings.PauseQuantiles = &Quantiles{P0: 12, P50: 40, P90: 310, P99: 880, P100: 900}
		runs[i].Settings.Pause = "@gc-pauses.txt"
	}
	skipped := testRun(len(runs), "fenced", "4s", 0, RunMeasures{})
	skipped.Status, skipped.Valid, skipped.Dir, skipped.Measures, skipped.Why = CellSkipped, nil, "", nil, browserXSS[1]
	runs = append(runs, skipped)
	writeTestSweep(t, dir, runs[:len(runs)-1], append([]string{"lockcheck", "sweep"}, browserXSS...))
	s, err := ReadSweep(dir)
	require.NoError(t, err)
	s.Runs = runs
	require.NoError(t, WriteSweep(dir, s))

	srv := httptest.NewServer(http.FileServer(http.Dir(root)))
	defer srv.Close()
	b := newBrowser(t)
	b.do(t, chromedp.Navigate(srv.URL+"/20250102-050000-sweep/sweep.html"), chromedp.WaitVisible(chromedp.CSS("#heatmap-1")))
	b.screenshot(t, "sweep.png")
	assert.Equal(t, 2, eval[int](t, b, `document.querySelectorAll('table.heatmap').length`), "a heatmap per backend, workload and faults")
	assert.Equal(t, []string{"", "TTL 250ms", "TTL 500ms", "TTL 1s", "TTL 2s"},
		eval[[]string](t, b, `Array.from(document.querySelectorAll('#heatmap-1 tr:first-child th')).map(e => e.textContent)`), "TTL across")
	assert.Equal(t, []string{"false", "false", "held", "held"},
		eval[[]string](t, b, `Array.from(document.querySelectorAll('#heatmap-1 td.cell a.cell-link')).map(e => e.textContent)`))
	colours := eval[[]string](t, b, `Array.from(document.querySelectorAll('#heatmap-1 td.cell')).map(e => getComputedStyle(e).backgroundColor)`)
	require.Len(t, colours, 4)
	assert.Equal(t, "rgb(207, 50, 50)", colours[0], "every seed false: deep red")
	assert.Equal(t, "rgb(218, 251, 225)", colours[2], "none false: green")
	assert.Equal(t, colours[0], colours[1], "the same share false, the same colour")
	assert.NotEqual(t, colours[1], colours[2], "false and held differ")
	assert.Equal(t, 3, eval[int](t, b, `document.querySelectorAll('#heatmap-1 td.cell')[0].querySelectorAll('a.seed').length`), "a link per seed")

	assert.Equal(t, []string{"1s", "250ms"},
		eval[[]string](t, b, `Array.from(document.querySelectorAll('#frontier-table tr td:nth-child(4)')).map(e => e.textContent)`), "the frontier per workload")
	assert.Equal(t, 2, eval[int](t, b, `document.querySelectorAll('svg.frontier-chart circle.ring').length`), "drawn, a ring at each frontier")
	assert.Contains(t, eval[string](t, b, `document.querySelector('#decision-table').textContent`), "if duplicates corrupt data")
	assert.Contains(t, eval[string](t, b, `document.querySelector('#decision-table tr:nth-child(2)').textContent`), "TTL 1s")
	assert.Contains(t, eval[string](t, b, `document.querySelector('#quantiles').textContent`), "880.0", "the quantiles drawn from")
	assert.Contains(t, eval[string](t, b, `document.body.textContent`), browserXSS[1], "hostile text is shown as text")
	assert.Zero(t, eval[int](t, b, `window.__xss || 0`), "and never runs")

	b.do(t, chromedp.Click(chromedp.CSS(`#heatmap-1 td.cell a.cell-link`)), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	assert.Contains(t, eval[string](t, b, `location.pathname`), "/20250102-050000-sweep/run-0/report.html", "the cell's link opens its first run's report")
	assert.Empty(t, b.consoleErrors())
}
