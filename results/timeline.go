package results

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// Geometry of the timeline in SVG user units (pixels at 100% zoom). The plot
// grows with the run so a 20 s run keeps a TTL of 500 ms visible, up to a
// width that still scrolls comfortably.
const (
	labelW   = 64.0
	rightPad = 16.0
	topPad   = 6.0
	pitch    = 20.0 // lane height including the gap
	barH     = 14.0
	axisH    = 28.0
	pxPerSec = 60.0
	minPlotW = 900.0
	maxPlotW = 4800.0
	markR    = 3.0
	// zoomDetail is how many times finer than a pixel of the whole-run view
	// the drawing keeps intervals and writes apart, so zooming in shows them
	// one by one; closer than that they are merged, and the page says so.
	zoomDetail = 4.0
	// drawAllLimit is how many belief intervals, or writes, a timeline draws
	// one by one however close they are; past it they are merged as above,
	// which keeps the page of a long soak run light.
	drawAllLimit = 10_000
)

// timeline is the SVG drawing, as flat lists the template paints in order:
// lanes, bands across all lanes, grid, bars, marks, text.
type timeline struct {
	Width, Height float64
	// PlotX, PlotW, PlotY and AxisY place the plot in the drawing, SpanSec
	// is the run's length in seconds; the script needs them to zoom.
	PlotX, PlotW, SpanSec float64
	PlotY, AxisY          float64
	Lanes                 []lane
	Bands                 []shape
	Grid                  []shape // the axis and its ticks; the script redraws them on zoom
	Ticks                 []label
	Bars                  []shape
	Marks                 []shape
	Texts                 []label
	Notes                 []string // what was merged or left out, so the page says so
	Stall                 string   // the liveness stall and its reason, shown under the drawing
}

type lane struct {
	Label string
	Kind  string // "nemesis", "node" or "client": the page counts lanes by it
	Y, H  float64
	TextY float64
	Alt   bool // shaded, so the eye can follow a lane across a wide run
}

// shape is a rect (X, Y, W, H) or a path (D, drawn around x = 0 and moved
// to X). ID makes it a link target for the tables; Href links it back to its
// table row. A and B are its start and end in seconds since the span start:
// the page's script redraws the drawing from them when it zooms and pans.
type shape struct {
	ID, Href, Class, Title, D string
	X, Y, W, H                float64
	A, B                      float64
	Timed                     bool // A and B are set; lanes and the axis have no time
}

// label is a text in the drawing. A timed label sits at A and shows only
// while [A, B] is at least W pixels wide.
type label struct {
	X, Y        float64
	Text, Class string
	A, B, W     float64
	Timed       bool
}

// builder holds what drawing needs beyond the timeline itself.
type builder struct {
	tl           *timeline
	t0           int64
	plotW, plotY float64
	plotH        float64
	nsPerPx      float64
	// Belief bars and write marks closer than these are drawn as one; 0
	// draws each on its own.
	mergeBarNs, mergeMarkNs float64
	laneOf                  map[history.Process]int
	nodeLane                map[string]int
	lastBar                 map[barKey]int // index in tl.Bars of a lane's latest bar of a class
	lastEnd                 map[barKey]int64
	markAt                  map[markKey]bool
	beliefs, bars           int
	writes, dots            int
}

type barKey struct {
	lane  int
	class string
}

type markKey struct {
	lane  int
	class string
	slot  int // time since the span start in units of mergeMarkNs
}

func newTimeline(h *history.History, res *checker.Result, span checker.Interval) *timeline {
	dur := span.End - span.Start
	plotW := math.Min(maxPlotW, math.Max(minPlotW, float64(dur)/1e9*pxPerSec))
	procs := processes(h, res)
	nodes := nodeNames(h)
	b := &builder{
		tl: &timeline{Width: labelW + plotW + rightPad, PlotX: labelW, PlotW: plotW,
			SpanSec: float64(dur) / 1e9, PlotY: topPad},
		t0:       span.Start,
		plotW:    plotW,
		plotY:    topPad,
		plotH:    float64(1+len(nodes)+len(procs)) * pitch,
		nsPerPx:  float64(dur) / plotW,
		lastEnd:  map[barKey]int64{},
		laneOf:   map[history.Process]int{history.Nemesis: 0},
		nodeLane: map[string]int{},
		lastBar:  map[barKey]int{},
		markAt:   map[markKey]bool{},
	}
	grants, writes := countDrawn(h)
	if grants > drawAllLimit {
		b.mergeBarNs = float64(dur) / plotW / zoomDetail
	}
	if writes > drawAllLimit {
		b.mergeMarkNs = float64(dur) / plotW / zoomDetail
	}
	b.tl.AxisY = b.plotY + b.plotH
	b.tl.Height = b.tl.AxisY + axisH
	b.lanes(nodes, procs)
	b.axis(dur)
	b.faults(res.Faults)
	b.nodeStates(h, span.End)
	b.linkStates(h, span.End)
	b.history(h)
	b.windows(res.Checks.DoubleOwnership.List)
	b.leaseViolations(res.Checks.LeaseSafety.Evidence)
	b.fenceAnomalies(res.Checks.Fencing.Anomalies)
	b.resourceAnomalies(res.Checks.Resource.Anomalies)
	b.stall(&res.Checks.Liveness)
	if w := res.Checks.Linearizability.Window; w != nil {
		b.band("tl-linearizability", "", "linwin", w.Start, w.End,
			"linearizability "+res.Checks.Linearizability.Result+" in this window")
	}
	if b.bars < b.beliefs {
		b.tl.Notes = append(b.tl.Notes, fmt.Sprintf("Belief intervals less than %s ms apart are drawn as one bar, however far you zoom: %d intervals as %s.", fmtMs(b.mergeBarNs/1e6), b.beliefs, plural(b.bars, "bar")))
	}
	if b.dots < b.writes {
		b.tl.Notes = append(b.tl.Notes, fmt.Sprintf("Writes of one kind within %s ms of each other in a lane are drawn as one mark: %d writes as %s.", fmtMs(b.mergeMarkNs/1e6), b.writes, plural(b.dots, "mark")))
	}
	return b.tl
}

// countDrawn counts the grants and the completed writes of a history: what
// the timeline would draw one by one.
func countDrawn(h *history.History) (grants, writes int) {
	for i := range h.Events {
		e := &h.Events[i]
		switch {
		case e.F == history.FAcquire && e.Type == history.OK:
			grants++
		case e.F == history.FWrite && e.Type != history.Invoke && e.Type != history.Fail:
			writes++
		}
	}
	return grants, writes
}

// processes lists every client process of the history, and any the checker
// names that the history does not (so evidence always has a lane).
func processes(h *history.History, res *checker.Result) []history.Process {
	seen := map[history.Process]bool{}
	add := func(p history.Process) {
		if p != history.Nemesis {
			seen[p] = true
		}
	}
	for i := range h.Events {
		add(h.Events[i].Process)
	}
	c := &res.Checks
	for _, v := range c.LeaseSafety.Evidence {
		add(v.Earlier.Process)
		add(v.Later.Process)
	}
	for _, w := range c.DoubleOwnership.List {
		for _, p := range w.Processes {
			add(p)
		}
	}
	for _, a := range c.Resource.Anomalies {
		add(a.Process)
	}
	for _, a := range c.Fencing.Anomalies {
		add(a.Later.Process)
	}
	out := make([]history.Process, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (b *builder) x(ns int64) float64 {
	px := float64(ns-b.t0) / b.nsPerPx
	return round1(labelW + math.Max(0, math.Min(b.plotW, px)))
}

func (b *builder) laneY(l int) float64 { return b.plotY + float64(l)*pitch }

func (b *builder) midY(l int) float64 { return b.laneY(l) + pitch/2 }

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// lanes lays out the nemesis lane, a lane per node, then a lane per client
// process.
func (b *builder) lanes(nodes []string, procs []history.Process) {
	type named struct{ label, kind string }
	all := []named{{history.Nemesis.String(), "nemesis"}}
	for _, n := range nodes {
		b.nodeLane[n] = len(all)
		all = append(all, named{n, "node"})
	}
	for _, p := range procs {
		b.laneOf[p] = len(all)
		all = append(all, named{p.String(), "client"})
	}
	for i, n := range all {
		y := b.laneY(i)
		b.tl.Lanes = append(b.tl.Lanes, lane{Label: n.label, Kind: n.kind, Y: y, H: pitch, TextY: y + pitch/2 + 4, Alt: i%2 == 1})
	}
}

// secs is a CLOCK_MONOTONIC time as seconds since the span start, to the
// microsecond: what the script positions shapes by.
func (b *builder) secs(ns int64) float64 { return math.Round(float64(ns-b.t0)/1e3) / 1e6 }

// timed sets a shape's time span.
func (b *builder) timed(s shape, start, end int64) shape {
	s.A, s.B, s.Timed = b.secs(start), b.secs(end), true
	return s
}

// axis draws seconds since the span start, with a tick about every 100 px.
func (b *builder) axis(dur int64) {
	step := niceStep(float64(dur) / 1e9 / (b.plotW / 100))
	decimals := max(0, int(-math.Floor(math.Log10(step))))
	axisY := b.plotY + b.plotH
	b.tl.Grid = append(b.tl.Grid, shape{Class: "axis", D: fmt.Sprintf("M%.1f %.1fH%.1f", labelW, axisY, labelW+b.plotW)})
	for k := 0; ; k++ {
		sec := float64(k) * step
		if sec*1e9 > float64(dur)+1 {
			break
		}
		x := b.x(b.t0 + int64(sec*1e9))
		b.tl.Grid = append(b.tl.Grid,
			shape{Class: "grid", D: fmt.Sprintf("M%.1f %.1fV%.1f", x, b.plotY, axisY)},
			shape{Class: "axis", D: fmt.Sprintf("M%.1f %.1fv4", x, axisY)})
		b.tl.Ticks = append(b.tl.Ticks, label{X: x, Y: axisY + 16, Class: "tick", Text: strconv.FormatFloat(sec, 'f', decimals, 64) + " s"})
	}
}

// niceStep rounds a step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) {
		return 1
	}
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*pow {
			return m * pow
		}
	}
	return 10 * pow
}

// band shades [start, end] across every lane.
func (b *builder) band(id, href, class string, start, end int64, title string) {
	x0, x1 := b.x(start), b.x(end)
	b.tl.Bands = append(b.tl.Bands, b.timed(shape{ID: id, Href: href, Class: class, Title: title,
		X: x0, Y: b.plotY, W: round1(math.Max(2, x1-x0)), H: b.plotH}, start, end))
}

// bar draws [start, end] in a lane. Bars of one class that overlap the
// lane's previous one, or come closer to it than mergeBarNs, extend it
// instead: a long run stays a light page.
func (b *builder) bar(l int, class string, start, end int64, title func() string) {
	x0, x1 := b.x(start), b.x(end)
	key := barKey{l, class}
	if i, ok := b.lastBar[key]; ok && (start < b.lastEnd[key] || float64(start-b.lastEnd[key]) < b.mergeBarNs) {
		last := &b.tl.Bars[i]
		last.W = round1(math.Max(last.W, x1-last.X))
		last.B = math.Max(last.B, b.secs(end))
		b.lastEnd[key] = max(b.lastEnd[key], end)
		return
	}
	b.lastBar[key] = len(b.tl.Bars)
	b.lastEnd[key] = end
	b.tl.Bars = append(b.tl.Bars, b.timed(shape{Class: class, Title: title(),
		X: x0, Y: b.laneY(l) + (pitch-barH)/2, W: round1(math.Max(1, x1-x0)), H: barH}, start, end))
}

func (b *builder) faults(fs []checker.Fault) {
	for i, f := range fs {
		if i == maxRows {
			break
		}
		class := faultClass(f.Kind)
		end := max(f.End, f.Start)
		title := fmt.Sprintf("%s %s from %s", f.Kind, f.Target, relSec(f.Start, b.t0))
		if end > f.Start {
			title += " to " + relSec(end, b.t0)
		}
		b.band("", "", class, f.Start, end, title)
		x0, x1 := b.x(f.Start), b.x(end)
		b.tl.Bars = append(b.tl.Bars, b.timed(shape{ID: markID("fault", i), Href: "#" + rowID("fault", i), Class: class + " nem",
			Title: title, X: x0, Y: b.laneY(0) + (pitch-barH)/2, W: round1(math.Max(2, x1-x0)), H: barH}, f.Start, end))
		b.label(x0, x1, b.midY(0)+3.5, "nem-label", f.Kind+" "+f.Target, f.Start, end)
	}
}

// history draws the belief intervals as the checks read them
// (checker.Beliefs) and the writes straight from the events.
func (b *builder) history(h *history.History) {
	for _, bl := range checker.Beliefs(h) {
		b.belief(bl)
	}
	writing := map[history.Process]*history.Value{}
	for i := range h.Events {
		e := &h.Events[i]
		if e.Process == history.Nemesis || e.F != history.FWrite {
			continue
		}
		if e.Type == history.Invoke {
			writing[e.Process] = e.Value
			continue
		}
		b.write(e, writing[e.Process])
		delete(writing, e.Process)
	}
}

// belief draws one belief interval: solid while the service kept the
// lease, hatched from the moment it certainly let it go (LetGo), when the
// client believes in a lock the service no longer holds for it.
func (b *builder) belief(bl checker.Belief) {
	p, key, start, end := bl.Process, bl.Key, bl.Start, bl.End
	l := b.laneOf[p]
	b.beliefs++
	before := len(b.tl.Bars)
	liveEnd := end
	if bl.LetGo > 0 {
		liveEnd = max(start, min(end, bl.LetGo))
	}
	b.bar(l, "belief", start, liveEnd, func() string {
		return fmt.Sprintf("%s held %q from %s to %s, fence %s", p, key, relSec(start, b.t0), relSec(end, b.t0), fmtFence(bl.Fence))
	})
	if liveEnd < end {
		b.bar(l, "belief-late", liveEnd, end, func() string {
			return fmt.Sprintf("%s still believed it held %q after the service had let its lease go at %s", p, key, relSec(liveEnd, b.t0))
		})
	}
	if len(b.tl.Bars) > before {
		b.bars++
	}
}

// write marks a completed write: a dot when accepted, a cross when the
// resource refused it, a ring when its outcome is unknown.
func (b *builder) write(e *history.Event, sent *history.Value) {
	if e.Type == history.Fail {
		return // it certainly did not happen
	}
	b.writes++
	class, shapeD, outcome := "write-ok", dot, "accepted"
	switch {
	case e.Type == history.Info:
		class, outcome = "write-unknown", "outcome unknown"
	case e.Value != nil && e.Value.Accepted != nil && !*e.Value.Accepted:
		class, shapeD, outcome = "write-refused", cross, "refused"
	}
	l, x := b.laneOf[e.Process], b.x(e.Time)
	if b.mergeMarkNs > 0 {
		key := markKey{l, class, int(float64(e.Time-b.t0) / b.mergeMarkNs)}
		if b.markAt[key] {
			return
		}
		b.markAt[key] = true
	}
	b.dots++
	title := fmt.Sprintf("%s wrote at %s: %s", e.Process, relSec(e.Time, b.t0), outcome)
	if sent != nil && sent.Value != nil {
		title = fmt.Sprintf("%s wrote %d to %q at %s (read %s, fence %s): %s", e.Process, *sent.Value, e.Key,
			relSec(e.Time, b.t0), fmtFence(sent.Read), fmtFence(sent.Fence), outcome)
	}
	if e.Error != "" {
		title += " (" + e.Error + ")"
	}
	b.mark(shape{Class: class, Title: title}, shapeD, x, b.midY(l), markR, e.Time)
}

// mark places a mark drawn by shapeD, of radius r, at (x, y) and time t.
func (b *builder) mark(s shape, shapeD func(x, y, r float64) string, x, y, r float64, t int64) {
	s.D, s.X = shapeD(0, y, r), x
	b.tl.Marks = append(b.tl.Marks, b.timed(s, t, t))
}

// label writes text at the start of [start, end] in a lane. It is hidden
// while the span is too narrow for it; the script shows it once the user
// zooms in far enough.
func (b *builder) label(x0, x1, y float64, class, text string, start, end int64) {
	l := label{X: x0 + 3, Y: y, Class: class, Text: text, A: b.secs(start), B: b.secs(end),
		W: 6*float64(len([]rune(text))) + 4, Timed: true}
	if x1-x0 < l.W {
		l.Class += " hidden"
	}
	b.tl.Texts = append(b.tl.Texts, l)
}

func (b *builder) windows(ws []checker.Window) {
	for i, w := range ws {
		if i == maxRows {
			break
		}
		title := fmt.Sprintf("%s %q for %s ms from %s; %s accepted", checker.BelievedHeld(w.Processes), w.Key, fmtMs(w.Ms), relSec(w.Start, b.t0), plural(w.Unsafe, "write"))
		b.band(markID("double_ownership", i), "#"+rowID("double_ownership", i), "window", w.Start, w.End, title)
		// Outline every participating lane across the window.
		for _, p := range w.Processes {
			l := b.laneOf[p]
			x0, x1 := b.x(w.Start), b.x(w.End)
			b.tl.Bars = append(b.tl.Bars, b.timed(shape{Class: "window-lane", Title: title,
				X: x0, Y: b.laneY(l) + (pitch-barH)/2, W: round1(math.Max(2, x1-x0)), H: barH}, w.Start, w.End))
		}
	}
}

// leaseViolations mark the later grant and draw a line up or down to the
// lane of the client whose lease was still live.
func (b *builder) leaseViolations(ev []checker.LeaseViolation) {
	for i, v := range ev {
		if i == maxRows {
			break
		}
		x := b.x(v.Later.OK)
		from, to := b.midY(b.laneOf[v.Earlier.Process]), b.midY(b.laneOf[v.Later.Process])
		title := fmt.Sprintf("%s was granted %q at %s while %s's lease was certainly live until %s", v.Later.Process, v.Key,
			relSec(v.Later.OK, b.t0), v.Earlier.Process, relSec(v.Earlier.CertainEnd, b.t0))
		b.mark(shape{Class: "violation-link"}, func(x, _, _ float64) string {
			return fmt.Sprintf("M%.1f %.1fV%.1f", x, from, to)
		}, x, 0, 0, v.Later.OK)
		b.mark(shape{ID: markID("lease_safety", i), Href: "#" + rowID("lease_safety", i), Class: "violation", Title: title},
			triangle, x, to, markR+2, v.Later.OK)
	}
}

func (b *builder) fenceAnomalies(as []checker.FenceAnomaly) {
	for i, a := range as {
		if i == maxRows {
			break
		}
		title := fmt.Sprintf("fence %s: %s got fence %s at %s after %s got fence %s", a.Kind, a.Later.Process,
			fmtFence(a.Later.Fence), relSec(a.Later.OK, b.t0), a.Earlier.Process, fmtFence(a.Earlier.Fence))
		b.mark(shape{ID: markID("fencing", i), Href: "#" + rowID("fencing", i), Class: "fence-anomaly", Title: title},
			diamond, b.x(a.Later.OK), b.midY(b.laneOf[a.Later.Process]), markR+2, a.Later.OK)
	}
}

// resourceAnomalies mark lost updates and stale writes accepted in red; a
// stale write refused is fencing doing its job and keeps the refused cross.
func (b *builder) resourceAnomalies(as []checker.ResourceAnomaly) {
	for i, a := range as {
		if i == maxRows {
			break
		}
		class, shapeD := "anomaly", dot
		if a.Kind == checker.StaleWriteRefused {
			class, shapeD = "write-refused anomaly-refused", cross
		}
		title := fmt.Sprintf("%s: %s wrote %d to %q at %s (read %d, resource held %d, fence %s, highest %s)", a.Kind, a.Process,
			a.Value, a.Key, relSec(a.Time, b.t0), a.Read, a.Prev, fmtFence(a.Fence), fmtFence(a.Highest))
		b.mark(shape{ID: markID("resource", i), Href: "#" + rowID("resource", i), Class: class, Title: title},
			shapeD, b.x(a.Time), b.midY(b.laneOf[a.Process]), markR+2, a.Time)
	}
}

func (b *builder) stall(l *checker.Liveness) {
	if l.Stall == nil {
		return
	}
	text := fmt.Sprintf("Longest stretch with no grant while clients were trying: %s ms, from %s to %s", fmtMs(l.LongestStallMs),
		relSec(l.Stall.Start, b.t0), relSec(l.Stall.End, b.t0))
	if l.StuckUntilEnd {
		text += ", until the end of the run"
	}
	if l.StallReason != "" {
		text += ". " + l.StallReason
	}
	b.tl.Stall = text
	b.band("tl-stall", "#stall", "stall", l.Stall.Start, l.Stall.End, text)
}

// Mark shapes as SVG path data, centred on (x, y).

func dot(x, y, r float64) string {
	return fmt.Sprintf("M%.1f %.1fm-%g 0a%g %g 0 1 0 %g 0a%g %g 0 1 0 -%g 0", x, y, r, r, r, 2*r, r, r, 2*r)
}

func cross(x, y, r float64) string {
	return fmt.Sprintf("M%.1f %.1fl%g %gm0 -%gl-%g %g", x-r, y-r, 2*r, 2*r, 2*r, 2*r, 2*r)
}

func triangle(x, y, r float64) string {
	return fmt.Sprintf("M%.1f %.1fl%g -%gh-%gz", x, y+r, r, 2*r, 2*r)
}

func diamond(x, y, r float64) string {
	return fmt.Sprintf("M%.1f %.1fl%g %gl-%g %gl-%g -%gz", x, y-r, r, r, r, r, r, r)
}
