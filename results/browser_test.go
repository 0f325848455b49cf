package results

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// browserXSS are strings a hostile history could carry; each would set
// window.__xss if the page ever ran it.
var browserXSS = []string{
	`<script>window.__xss=1</script>`,
	`<img src=x onerror="window.__xss=2">`,
	`"><svg onload="window.__xss=3">`,
}

// chromium finds Debian's chromium (scripts/setup installs it), or
// $LOCKCHECK_CHROMIUM.
func chromium(t testing.TB) string {
	if p := os.Getenv("LOCKCHECK_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed, so the report pages are not checked in a browser (scripts/setup installs it: apt-get install chromium)")
	return ""
}

// browser starts one headless chromium for a test and collects every console
// error and uncaught exception its tabs report.
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

func newBrowser(t testing.TB) *browser {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-gpu", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // chromium refuses to sandbox as root
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{ctx: ctx}
	// The first Run starts the browser, and must not carry a timeout.
	require.NoError(t, chromedp.Do(ctx))
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.errors = append(b.errors, m.String())
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// consoleErrors returns the errors reported so far.
func (b *browser) consoleErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// do runs steps with a time limit.
func (b *browser) do(t testing.TB, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

func eval[T any](t testing.TB, b *browser, js string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	require.NoError(t, err, js)
	return v
}

// screenshot saves the page into the test's temporary folder, and also into
// $LOCKCHECK_SCREENSHOTS when it is set, for a person to look at.
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(t.TempDir(), name), png, 0o644))
	if dir := os.Getenv("LOCKCHECK_SCREENSHOTS"); dir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
	}
}

// storyHistory is a 30 s run of four clients taking the lock in turn every
// 100 ms, with a paused holder at 20 s whose late write is a lost update,
// and nemesis events on three nodes (a pause, a kill and restart, a clock
// jump, roles and a promotion). Every text field an attacker could fill
// carries s.
func storyHistory(s hostile) *history.History {
	h := &history.History{Header: history.Header{
		Version: history.SchemaVersion, Started: "2025-01-02T03:04:05Z", StartTime: t0,
		Config: history.RunConfig{
			Backend: "redis", Variant: "correct", Workload: "unfenced", Nemesis: []string{"pause-holder"},
			Seed: 7, Clients: 4, Keys: 1, TTLms: 500, TimeLimitMs: 30_000,
			CommandLine: []string{"lockcheck", "run", "--nemesis", "pause-holder", "--seed", "7"},
			Versions:    map[string]string{"redis-server": "7.0.15"},
		},
	}}
	var evs []history.Event
	add := func(ms float64, p history.Process, typ history.Type, f string, v *history.Value) *history.Event {
		e := history.Event{Time: t0 + int64(ms*1e6), Process: p, Type: typ, F: f, Value: v}
		if p != history.Nemesis {
			e.Key = s.key
		}
		evs = append(evs, e)
		return &evs[len(evs)-1]
	}
	value, fence := int64(0), int64(0)
	cycle := func(ms float64, p history.Process) {
		fence++
		add(ms, p, history.Invoke, history.FAcquire, nil)
		add(ms+2, p, history.OK, history.FAcquire, &history.Value{Token: fmt.Sprint("t", fence), Fence: history.Int64(fence), TTLms: 500})
		add(ms+5, p, history.Invoke, history.FWrite, &history.Value{Value: history.Int64(value + 1), Read: history.Int64(value), Fence: history.Int64(fence), Req: fmt.Sprint("r", fence)})
		add(ms+6, p, history.OK, history.FWrite, &history.Value{Accepted: history.Bool(true), Prev: history.Int64(value)})
		value++
		add(ms+30, p, history.Invoke, history.FRelease, nil)
		add(ms+31, p, history.OK, history.FRelease, nil)
	}
	cycles := func(from, to int) {
		for i := from; i < to; i++ {
			ms := float64(i) * 100
			cycle(ms, history.Process(i%4))
			if i%50 == 7 { // a busy lock now and then
				add(ms+10, history.Process((i+1)%4), history.Invoke, history.FAcquire, nil)
				e := add(ms+11, history.Process((i+1)%4), history.Fail, history.FAcquire, nil)
				e.Error = s.errText
			}
		}
	}
	cycles(0, 199)
	// c1 takes the lock, is paused past its lease, c2 takes it, and c1 wakes
	// to write a value computed from what it read a second ago.
	fence++
	f1, read1 := fence, value
	add(20_000, 1, history.Invoke, history.FAcquire, nil)
	add(20_002, 1, history.OK, history.FAcquire, &history.Value{Token: "c1", Fence: history.Int64(f1), TTLms: 500})
	add(20_004, history.Nemesis, history.Info, history.NemPause, &history.Value{Target: "c1", DurationMs: 1000})
	cycle(20_550, 2)
	add(21_004, history.Nemesis, history.Info, history.NemResume, &history.Value{Target: "c1"})
	add(21_005, 1, history.Invoke, history.FWrite, &history.Value{Value: history.Int64(read1 + 1), Read: history.Int64(read1), Fence: history.Int64(f1), Req: "late"})
	add(21_006, 1, history.OK, history.FWrite, &history.Value{Accepted: history.Bool(true), Prev: history.Int64(value)})
	value = read1 + 1
	add(21_010, 1, history.Invoke, history.FRelease, nil)
	add(21_011, 1, history.OK, history.FRelease, nil)
	cycles(211, 300)

	node := func(ms float64, verb, target, detail string) {
		add(ms, history.Nemesis, history.Info, verb, &history.Value{Target: target, Detail: detail})
	}
	node(500, history.NemRole, "redis-0", "master")
	node(500, history.NemRole, "redis-1", "replica of redis-0")
	node(5_000, history.NemPause, "redis-2", "")
	node(6_000, history.NemResume, "redis-2", "")
	node(10_000, history.NemKill, "redis-1", "data wiped")
	node(11_000, history.NemStart, "redis-1", "data wiped")
	node(11_500, history.NemSwitchMaster, "redis-1", "redis-0 -> redis-1")
	node(12_000, history.NemClockJump, s.target, "+20s")
	node(14_000, history.NemClockReset, s.target, "reset")
	node(30_000, history.NemRunEnd, "", "")

	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Time < evs[j].Time })
	for i := range evs {
		evs[i].Index = int64(i)
	}
	h.Events = evs
	return h
}

// writeRun checks h for real and writes its run directory under parent.
func writeRun(t *testing.T, parent, name string, h *history.History) (string, *checker.Result) {
	t.Helper()
	dir := filepath.Join(parent, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	w, err := history.Create(filepath.Join(dir, HistoryFile), h.Header)
	require.NoError(t, err)
	for _, e := range h.Events {
		_, err := w.Append(e)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	res := checker.Check(h, nil, checker.Options{})
	require.NoError(t, WriteLinearizability(dir, res, checker.Options{}))
	require.NoError(t, WriteAll(dir, h, res))
	return dir, res
}

// browserStore is a store holding a run, a run whose every text is hostile,
// and a comparison of cells that ran, were skipped and failed.
func browserStore(t *testing.T) (store string, story *history.History, storyRes *checker.Result) {
	store = t.TempDir()
	story = storyHistory(hostile{key: "lock-0", target: "redis-2", errText: "lock is held by another client"})
	_, storyRes = writeRun(t, store, "20250102-030405-redis-unfenced", story)

	evil := hostile{key: browserXSS[0], target: browserXSS[1], errText: browserXSS[2]}
	evilHist := storyHistory(evil)
	evilHist.Header.Config.CommandLine = append(evilHist.Header.Config.CommandLine, browserXSS...)
	evilHist.Header.Config.Versions[browserXSS[0]] = browserXSS[1]
	_, _ = writeRun(t, store, "20250102-030500-redis-fenced", evilHist)

	cmpDir := filepath.Join(store, "20250102-040000"+CompareSuffix)
	_, good := writeRun(t, cmpDir, "20250102-040001-redis-fenced", lockCycles(3, 200, 10e9))
	_, bad := writeRun(t, cmpDir, "20250102-040012-redis-unfenced", story)
	ran := func(c Cell, res *checker.Result, dir string) Cell {
		c.Dir = dir
		c.Ran(&Results{Valid: res.Valid, Reason: res.Reason, Checks: res.Checks})
		return c
	}
	cmp := &Comparison{Started: "2025-01-02T04:00:00Z", Finished: "2025-01-02T04:01:00Z", TimeLimitMs: 15_000, Seed: 3,
		CommandLine: []string{"lockcheck", "compare", "--backends", browserXSS[0]},
		Cells: []Cell{
			ran(Cell{Backend: "redis", Variant: "correct", Workload: "fenced", Nemesis: []string{}}, good, "20250102-040001-redis-fenced"),
			ran(Cell{Backend: "redis", Variant: "correct", Workload: "unfenced", Nemesis: []string{"pause-holder"}}, bad, "20250102-040012-redis-unfenced"),
			{Backend: "redis", Variant: "correct", Workload: "fenced", Nemesis: []string{"kill-client"}, Status: CellSkipped, Why: "kill-client aims at a failpoint " + browserXSS[0]},
			{Backend: "etcd", Variant: "mutex", Workload: "fenced", Nemesis: []string{"pause-holder"}, Status: CellError, Why: browserXSS[1]},
		}}
	require.NoError(t, WriteComparison(cmpDir, cmp))
	return store, story, storyRes
}

// clientLanes counts the client processes of a history.
func clientLanes(h *history.History) int {
	seen := map[history.Process]bool{}
	for _, e := range h.Events {
		if e.Process != history.Nemesis {
			seen[e.Process] = true
		}
	}
	return len(seen)
}

func TestPagesInBrowser(t *testing.T) {
	chromium(t)
	store, story, storyRes := browserStore(t)
	handler, err := StoreHandler(store)
	require.NoError(t, err)
	srv := httptest.NewServer(handler)
	defer srv.Close()
	b := newBrowser(t)
	require.NotEmpty(t, storyRes.Checks.DoubleOwnership.List, "the story has a double-ownership window to click")
	require.Positive(t, storyRes.Checks.Resource.LostUpdates, "and a lost update")

	t.Run("report", func(t *testing.T) {
		b.do(t, chromedp.Navigate(srv.URL+"/20250102-030405-redis-unfenced/report.html"), chromedp.WaitVisible(chromedp.CSS("#timeline.live")))
		assert.Equal(t, clientLanes(story), eval[int](t, b, `document.querySelectorAll('#timeline .lane-client').length`), "a lane per client")
		assert.Equal(t, 3, eval[int](t, b, `document.querySelectorAll('#timeline .lane-node').length`), "a lane per node")
		assert.Equal(t, []string{"redis-0", "redis-1", "redis-2"},
			eval[[]string](t, b, `Array.from(document.querySelectorAll('#timeline .lane-node')).map(e => e.textContent)`))
		for _, class := range []string{"node-paused", "node-killed", "node-clock", "node-role", "window", "anomaly", "belief"} {
			assert.Positive(t, eval[int](t, b, `document.querySelectorAll('#timeline .`+class+`').length`), "the timeline draws %s", class)
		}
		assert.Positive(t, eval[int](t, b, `document.querySelectorAll('svg.chart').length`), "latency and grant charts")
		b.screenshot(t, "report.png")

		// The 48 ms window is a few pixels wide in the 30 s run; clicking
		// its row zooms in until it is plainly visible, and scrolls to it.
		const band = `document.getElementById('tl-double_ownership-1')`
		before := eval[float64](t, b, band+`.getBoundingClientRect().width`)
		b.do(t, chromedp.Click(chromedp.CSS(`a[href="#tl-double_ownership-1"]`)))
		after := eval[map[string]float64](t, b, `(() => {
			const svg = document.getElementById('timeline'), s = svg.getBoundingClientRect();
			const scale = s.width / svg.viewBox.baseVal.width, plotLeft = s.left + (+svg.dataset.plotx) * scale;
			const plotRight = plotLeft + (+document.getElementById('tl-clip-rect').getAttribute('width')) * scale;
			const r = `+band+`.getBoundingClientRect();
			return {width: r.width, left: r.left - plotLeft, right: plotRight - r.right, top: r.top, bottom: innerHeight - r.bottom,
				focused: `+band+`.classList.contains('focus') ? 1 : 0};
		})()`)
		assert.Greater(t, after["width"], 5*before, "zoomed in: %v px before, %v after", before, after["width"])
		for _, side := range []string{"left", "right", "top", "bottom"} {
			assert.GreaterOrEqual(t, after[side], 0.0, "the window is inside the plot and the viewport (%s)", side)
		}
		assert.Equal(t, 1.0, after["focused"])
		b.screenshot(t, "report-zoomed.png")

		// The linearizability failure links porcupine's own drawing of it.
		b.do(t, chromedp.Click(chromedp.CSS(`a[href="linearizability.html"]`)), chromedp.WaitReady(chromedp.CSS("body")))
		assert.True(t, strings.HasSuffix(eval[string](t, b, `location.pathname`), "/linearizability.html"))
		b.do(t, chromedp.Navigate(srv.URL+"/20250102-030405-redis-unfenced/report.html"), chromedp.WaitVisible(chromedp.CSS("#timeline.live")))

		// Hovering a belief interval shows its details at once.
		b.do(t, chromedp.Evaluate[chromedp.Void](`(() => {
			const el = document.querySelector('#timeline .belief'), r = el.getBoundingClientRect();
			el.dispatchEvent(new MouseEvent('mousemove', {bubbles: true, clientX: r.left + 1, clientY: r.top + 1}));
		})()`))
		assert.Contains(t, eval[string](t, b, `document.getElementById('tip').hidden ? '' : document.getElementById('tip').textContent`), "held")
	})

	t.Run("hostile run executes nothing", func(t *testing.T) {
		b.do(t, chromedp.Navigate(srv.URL+"/20250102-030500-redis-fenced/report.html"), chromedp.WaitVisible(chromedp.CSS("#timeline.live")))
		assert.Equal(t, "undefined", eval[string](t, b, `typeof window.__xss`))
		text := eval[string](t, b, `document.body.innerText`)
		for _, x := range browserXSS {
			assert.Contains(t, text, x, "shown as text")
		}
		assert.Contains(t, eval[[]string](t, b, `Array.from(document.querySelectorAll('#timeline .lane-node')).map(e => e.textContent)`), browserXSS[1])
	})

	t.Run("comparison", func(t *testing.T) {
		b.do(t, chromedp.Navigate(srv.URL+"/20250102-040000-compare/compare.html"), chromedp.WaitVisible(chromedp.CSS(".matrix")))
		assert.Equal(t, "undefined", eval[string](t, b, `typeof window.__xss`))
		classes := eval[[]string](t, b, `Array.from(document.querySelectorAll('.matrix td.cell')).map(td => td.className.replace('cell ', ''))`)
		assert.ElementsMatch(t, []string{"pass", "fail", "skipped", "unknown"}, classes)
		b.screenshot(t, "compare.png")
		b.do(t, chromedp.Click(chromedp.CSS(`.matrix td.fail a`)), chromedp.WaitVisible(chromedp.CSS("#timeline.live")))
		assert.True(t, strings.HasSuffix(eval[string](t, b, `location.pathname`), "/20250102-040012-redis-unfenced/report.html"), "a cell links to its run's report")
	})

	t.Run("serve index", func(t *testing.T) {
		b.do(t, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#runs")))
		assert.Equal(t, "undefined", eval[string](t, b, `typeof window.__xss`))
		visible := `document.querySelectorAll('#runs tbody tr:not([hidden])').length`
		assert.Equal(t, 5, eval[int](t, b, visible), "two runs, a comparison and its two runs")
		b.screenshot(t, "index.png")
		b.do(t, chromedp.SetValue(chromedp.CSS("#f-verdict"), "false"), chromedp.Evaluate[chromedp.Void](`document.getElementById('f-verdict').dispatchEvent(new Event('change'))`))
		assert.Equal(t, 3, eval[int](t, b, visible), "the story run, its copy in the comparison and the hostile run are false")
		b.do(t, chromedp.SetValue(chromedp.CSS("#f-verdict"), ""), chromedp.SendKeys(chromedp.CSS("#f-text"), "compare"))
		assert.Equal(t, 3, eval[int](t, b, visible), "the comparison and its runs")
		b.do(t, chromedp.Click(chromedp.CSS(`#runs tr.compare a`)), chromedp.WaitVisible(chromedp.CSS(".matrix")))
	})

	assert.Empty(t, b.consoleErrors(), "no page logged an error")
}

// BenchmarkBrowserOpensReport measures how long headless chromium takes to
// load report.html and lay out its timeline (the script marks it live): by
// default the report of a synthetic 60 s run of 10 clients; with
// $LOCKCHECK_REPORT, that file. Run it by hand:
//
//	LOCKCHECK_REPORT=store/latest/report.html go test -run - -bench BrowserOpensReport ./results
func BenchmarkBrowserOpensReport(b *testing.B) {
	path := os.Getenv("LOCKCHECK_REPORT")
	if path == "" {
		dir := b.TempDir()
		h := lockCycles(10, 3000, 60e9)
		res := checker.Check(h, nil, checker.Options{})
		require.NoError(b, WriteAll(dir, h, res))
		path = filepath.Join(dir, ReportFile)
	}
	fi, err := os.Stat(path)
	require.NoError(b, err)
	br := newBrowser(b)
	for b.Loop() {
		br.do(b, chromedp.Navigate("file://"+path), chromedp.WaitVisible(chromedp.CSS("#timeline.live")))
		b.StopTimer()
		br.do(b, chromedp.Navigate("about:blank"))
		b.StartTimer()
	}
	b.ReportMetric(float64(fi.Size())/1e6, "MB")
}
