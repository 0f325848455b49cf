package results

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

func renderReport(t *testing.T, h *history.History, res *checker.Result) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, writeReport(&buf, h, res, "", ""))
	return buf.String()
}

// svgOf returns the timeline and checks that it is well-formed XML, which
// an inline SVG must be for every browser to draw it.
func svgOf(t *testing.T, page string) string {
	t.Helper()
	start, end := strings.Index(page, "<svg"), strings.Index(page, "</svg>")
	require.True(t, start >= 0 && end > start, "the page has a timeline")
	svg := page[start : end+len("</svg>")]
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "timeline SVG is well-formed")
	}
	return svg
}

func TestReportShowsTheRun(t *testing.T) {
	page := renderReport(t, sampleHistory(plain, "unfenced"), badResult(plain))
	svg := svgOf(t, page)

	assert.Contains(t, page, "<title>lockcheck redis/correct/unfenced: false</title>")
	assert.Contains(t, page, `<p class="verdict fail">Verdict: <b>false</b>. c0 and c1 both believed`)

	for _, lane := range []string{"nemesis", "c0", "c1", "c2", "c3"} {
		assert.Contains(t, svg, ">"+lane+"</text>", "a lane for %s", lane)
	}
	for _, want := range []string{
		`class="fault-pause"`,                       // the band across all lanes
		`id="tl-fault-1" class="fault-pause nem"`,   // the bar in the nemesis lane
		`id="tl-double_ownership-1" class="window"`, // the double-ownership band
		`class="window-lane"`,
		`id="tl-lease_safety-1" class="violation"`,
		`id="tl-fencing-1" class="fence-anomaly"`,
		`id="tl-resource-1" class="anomaly"`,
		`id="tl-resource-2" class="write-refused anomaly-refused"`,
		`id="tl-stall" class="stall"`,
		`id="tl-linearizability" class="linwin"`,
		`class="belief"`, `class="belief-late"`, `class="write-ok"`, `class="write-refused"`, `class="write-unknown"`,
		`>0.0 s</text>`, `>1.4 s</text>`,
	} {
		assert.Contains(t, svg, want)
	}
	// c0 believed from 5 ms to its release at 803 ms, paused from 10 ms to
	// 800 ms: the service let its 500 ms lease go at 510 ms, whatever c0
	// believed, so the rest of the belief is drawn as late.
	assert.Contains(t, svg, `c0 still believed it held &#34;lock&#34; after the service had let its lease go at 0.510 s`)

	for _, row := range []string{"lease_safety-1", "double_ownership-1", "resource-1", "fencing-1", "fault-1"} {
		assert.Contains(t, page, fmt.Sprintf(`<tr id="%s"><td><a href="#tl-%s" title="show in the timeline">1</a>`, row, row), "row %s links to the timeline", row)
		assert.Contains(t, svg, fmt.Sprintf(`<a href="#%s">`, row), "timeline links back to row %s", row)
	}
	assert.Contains(t, page, `<p id="stall"><a href="#tl-stall">Stall</a>: Longest stretch with no grant while clients were trying: 400 ms, from 1.000 s to 1.400 s, until the end of the run. c3 died holding lock with no TTL: i/o timeout</p>`)

	for _, check := range []string{"lease_safety", "double_ownership", "resource", "fencing", "linearizability", "liveness"} {
		assert.Contains(t, page, `<h3 id="`+check+`">`)
	}
	assert.Contains(t, page, `<span class="badge unknown">UNKNOWN</span>`)
	assert.Contains(t, page, `<tr><th><a href="#resource">resource</a></th><td><span class="badge fail">FAILED</span> 1 lost update, 0 stale writes accepted, 1 stale write refused</td></tr>`)
	assert.Contains(t, page, `<tr><th>lost_updates</th><td>1</td></tr>`)
	assert.Contains(t, page, `<tr><th>acquire_p99_ms</th><td>0</td></tr>`)
	assert.Contains(t, page, `<tr><th>command_line</th><td>lockcheck run --backend redis --think &#39;1ms 5ms&#39;</td></tr>`)
	assert.Contains(t, page, `<tr><th>versions redis-server</th><td>7.0.15</td></tr>`)
	assert.NotContains(t, page, "Belief intervals less than a pixel", "a small run is drawn in full")
}

func TestReportEscapesEverything(t *testing.T) {
	evil := hostile{key: xss, target: xss, errText: xss}
	h := sampleHistory(evil, "unfenced")
	h.Header.Config.CommandLine = append(h.Header.Config.CommandLine, xss)
	h.Header.Config.Versions[xss] = xss
	page := renderReport(t, h, badResult(evil))
	svgOf(t, page)

	assert.Equal(t, 1, strings.Count(page, "<script"), "no script but the report's own")
	assert.Contains(t, page, "<script>"+reportScriptText+"</script>")
	assert.NotContains(t, page, "alert(1)</script>")
	escaped := "&lt;script&gt;alert(1)&lt;/script&gt;"
	for _, where := range []string{
		"lost-update</td><td>" + escaped,   // a key in an anomaly table
		"pause " + escaped + " from 0.010", // a nemesis target in the timeline
		"<td>pause</td><td>" + escaped,     // and in the fault table
		"porcupine timed out: " + escaped,  // an error text
		"(" + escaped + ")</title>",        // an event's error on its write mark
	} {
		assert.Contains(t, page, where)
	}
}

// lockCycles is a history of n acquire-write-release cycles in dur ns,
// taken in turn by the given number of clients.
func lockCycles(clients, n int, dur int64) *history.History {
	h := &history.History{Header: history.Header{Version: 1, StartTime: t0,
		Config: history.RunConfig{Backend: "redis", Workload: "fenced", Clients: clients}}}
	h.Events = make([]history.Event, 0, 6*n)
	step := dur / int64(n)
	for i := 0; i < n; i++ {
		p, start := history.Process(i%clients), t0+int64(i)*step
		add := func(offset int64, typ history.Type, f string, v *history.Value) {
			h.Events = append(h.Events, history.Event{Index: int64(len(h.Events)), Time: start + offset*step/8,
				Process: p, Type: typ, F: f, Key: "k", Value: v})
		}
		add(0, history.Invoke, history.FAcquire, nil)
		add(1, history.OK, history.FAcquire, &history.Value{Fence: history.Int64(int64(i)), TTLms: 500})
		add(2, history.Invoke, history.FWrite, &history.Value{Value: history.Int64(int64(i + 1)), Read: history.Int64(int64(i))})
		add(4, history.OK, history.FWrite, &history.Value{Accepted: history.Bool(true), Prev: history.Int64(int64(i))})
		add(6, history.Invoke, history.FRelease, nil)
		add(7, history.OK, history.FRelease, nil)
	}
	return h
}

func TestReportAggregatesLongRuns(t *testing.T) {
	// 25,000 lock cycles of one client in 20 s: far more than the pixels.
	h := lockCycles(1, 25_000, 20e9)
	res := goodResult()
	res.Span = checker.Interval{Start: t0, End: t0 + 20e9}
	page := renderReport(t, h, res)
	svg := svgOf(t, page)

	marks := len(regexp.MustCompile(`class="write-ok"`).FindAllString(svg, -1))
	assert.LessOrEqual(t, marks, int(1200*zoomDetail), "one mark per quarter pixel at most")
	assert.Greater(t, marks, 4000)
	assert.Contains(t, page, "Writes of one kind within 4.17 ms of each other in a lane are drawn as one mark: 25000 writes as")
	assert.Contains(t, page, "Belief intervals less than 4.17 ms apart are drawn as one bar, however far you zoom: 25000 intervals as 1 bar.")
	assert.Less(t, len(page), 3<<19, "the page stays light")
}

// BenchmarkWriteAll writes every file for a 1,000,000-event history of 8
// clients, the size of the checker's benchmark.
func BenchmarkWriteAll(b *testing.B) {
	h := lockCycles(8, 1_000_000/6, 600e9)
	res := goodResult()
	res.Span = checker.Interval{Start: t0, End: t0 + 600e9}
	dir := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteAll(dir, h, res); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReportShowsAMergedWindow: a window of a paused holder and three
// clients granted the lock in turn is one row and one band, and every lane
// that took part is outlined.
func TestReportShowsAMergedWindow(t *testing.T) {
	res := badResult(plain)
	res.Checks.DoubleOwnership = checker.DoubleOwnership{Windows: 1, TotalMs: 390, MaxMs: 390, UnsafeWrites: 2, List: []checker.Window{
		{Key: plain.key, Start: at(520), End: at(910), Ms: 390, Processes: []history.Process{0, 1, 2, 3}, Faults: []string{"pause c0"}, Writes: []int64{7, 18}, Unsafe: 2},
	}}
	page := renderReport(t, sampleHistory(plain, "unfenced"), res)
	svg := svgOf(t, page)

	assert.Contains(t, page, `<td>lock</td><td>0.520 s</td><td>390</td><td>c0, c1, c2, c3</td><td>2</td><td>2</td><td>pause c0</td>`)
	assert.Equal(t, 1, strings.Count(svg, `class="window"`), "one band for the merged window")
	assert.Equal(t, 4, strings.Count(svg, `class="window-lane"`), "an outline in each participating lane")
	assert.Contains(t, svg, `c0, c1, c2 and c3 believed, at least two at once, they held &#34;lock&#34; for 390 ms from 0.520 s; 2 writes accepted`)

	var status checkStatus
	for _, s := range checkStatuses(sampleHistory(plain, "unfenced").Header.Config, res, t0) {
		if s.Key == "double_ownership" {
			status = s
		}
	}
	assert.Equal(t, checker.StatusFailed, status.Outcome)
	assert.Equal(t, "1 window, 390 ms total, max 390 ms, 2 unsafe writes", status.Numbers)
	assert.Equal(t, []string{`key "lock": c0, c1, c2 and c3 believed, at least two at once, they held the lock from 0.520 s for 390 ms, 2 writes accepted; faults: pause c0`}, status.Details)
}

// A scripted run's report explains the incident it reproduces, escaped.
func TestReportExplainsItsScenario(t *testing.T) {
	h, res := sampleHistory(plain, "unfenced"), badResult(plain)
	h.Header.Config.Scenario = &history.ScenarioInfo{
		Name: "demo-4", Title: "GC pause <b>past</b> the TTL", Source: "000_309f9daba51e2dfe.txt, demo step 4",
		Explain: "A pauses for 900 ms and its old figure overwrites B's.",
	}
	page := renderReport(t, h, res)
	assert.Contains(t, page, "Scenario demo-4")
	assert.Contains(t, page, "A pauses for 900 ms and its old figure overwrites B&#39;s.")
	assert.Contains(t, page, "GC pause &lt;b&gt;past&lt;/b&gt; the TTL")
}
