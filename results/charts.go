package results

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// Geometry of the latency and grant-rate charts, in SVG user units. They are
// drawn once at a fixed width; the page scales them to its own.
const (
	chartLeft    = 64.0
	chartPlotW   = 900.0
	chartRight   = 16.0
	chartTop     = 8.0
	chartPlotH   = 150.0
	chartBottom  = 28.0
	chartBuckets = 300 // columns of the latency chart at most
	maxRateBars  = 300 // bars of the grant-rate chart at most
)

// latencySeries are the operations whose latency the report shows over time,
// with the class that colours them.
var latencySeries = []struct{ name, class string }{
	{"acquire granted", "lat-acquire"},
	{"release", "lat-release"},
}

// charts are the liveness drawings: latency over time, grants per second,
// and latency quantiles per operation.
type charts struct {
	Latency   *chart
	Grants    *chart
	Quantiles []quantileRow
	Notes     []string // how the charts aggregate, so the page says so
}

type chart struct {
	Width, Height float64
	Label         string // what the chart shows, for screen readers
	Bands         []shape
	Grid          []shape
	Ticks         []label
	Paths         []shape // one path per series: cheap however long the run
	Bars          []shape
	Hover         []shape // transparent columns carrying each bucket's numbers
}

type quantileRow struct {
	Op                             string
	Count                          int
	P50, P90, P99, P999, Max, Mean string
}

// opLatencies are the latencies of one kind of operation, in time order.
type opLatencies struct {
	at, ns []int64 // completion time and latency
	// weight is how many operations each stands for: 1, or the stride of
	// a long history's sample (history.Excerpt).
	weight int
}

func (o *opLatencies) add(at, ns int64) {
	o.at = append(o.at, at)
	o.ns = append(o.ns, ns)
}

// latencies pairs each client operation's invoke with its completion.
// Operations of unknown outcome have no latency; they are counted apart, by
// function.
func latencies(h *history.History) (ops map[string]*opLatencies, unknown map[string]int) {
	ops = map[string]*opLatencies{}
	unknown = map[string]int{}
	invoked := map[history.Process]int64{}
	events, weight := h.Events, 1
	if x := h.Excerpt; x != nil {
		events, weight = x.Operations, x.Stride
	}
	for i := range events {
		e := &events[i]
		if e.Process == history.Nemesis {
			continue
		}
		if e.Type == history.Invoke {
			invoked[e.Process] = e.Time
			continue
		}
		start, ok := invoked[e.Process]
		if !ok {
			continue
		}
		delete(invoked, e.Process)
		name := e.F
		switch {
		case e.Type == history.Info:
			unknown[e.F] += weight
			continue
		case e.F == history.FAcquire:
			name = opName(e.F, e.Type)
		case e.Type == history.Fail:
			continue
		}
		if ops[name] == nil {
			ops[name] = &opLatencies{weight: weight}
		}
		ops[name].add(e.Time, e.Time-start)
	}
	return ops, unknown
}

// opName names an operation as the quantile table lists it: an acquire that
// was refused waits differently from one that was granted.
func opName(f string, t history.Type) string {
	if f != history.FAcquire {
		return f
	}
	if t == history.Fail {
		return "acquire refused"
	}
	return "acquire granted"
}

func newCharts(h *history.History, res *checker.Result, span checker.Interval) *charts {
	ops, unknown := latencies(h)
	c := &charts{}
	for _, name := range []string{"acquire granted", "acquire refused", "release", history.FExtend, history.FWrite} {
		o := ops[name]
		if o == nil {
			continue
		}
		sorted := slices.Clone(o.ns)
		slices.Sort(sorted)
		var sum float64
		for _, v := range sorted {
			sum += float64(v)
		}
		c.Quantiles = append(c.Quantiles, quantileRow{Op: name, Count: len(sorted) * o.weight,
			P50: nsMs(quantile(sorted, .5)), P90: nsMs(quantile(sorted, .9)), P99: nsMs(quantile(sorted, .99)),
			P999: nsMs(quantile(sorted, .999)), Max: nsMs(sorted[len(sorted)-1]), Mean: fmtMs(sum / float64(len(sorted)) / 1e6)})
	}
	if len(c.Quantiles) == 0 {
		return nil
	}
	var lost []string
	for _, f := range []string{history.FAcquire, history.FRelease, history.FExtend, history.FWrite} {
		if n := unknown[f]; n > 0 {
			lost = append(lost, plural(n, f))
		}
	}
	if x := h.Excerpt; x != nil && x.Stride > 1 {
		c.Notes = append(c.Notes, fmt.Sprintf("A long history: these figures are drawn from one operation in %d (%d of %d), counts scaled up.", x.Stride, len(x.Operations)/2, x.Operated))
	}
	if lost != nil {
		c.Notes = append(c.Notes, "Operations of unknown outcome (a timeout, a dropped connection) have no latency and are left out: "+checker.JoinAnd(lost)+".")
	}
	c.Latency = latencyChart(ops, res.Faults, span, &c.Notes)
	c.Grants = grantChart(ops["acquire granted"], res.Faults, span, &c.Notes)
	return c
}

// quantile of sorted values, nearest rank.
func quantile[T int64 | float64](sorted []T, q float64) T {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(len(sorted)-1, i))]
}

func nsMs(ns int64) string { return fmtMs(float64(ns) / 1e6) }

// frame starts a chart: its size, fault bands behind everything, and the
// time axis.
func frame(title string, faults []checker.Fault, span checker.Interval) *chart {
	ch := &chart{Width: chartLeft + chartPlotW + chartRight, Height: chartTop + chartPlotH + chartBottom, Label: title}
	dur := float64(span.End - span.Start)
	xOf := func(ns int64) float64 {
		return round1(chartLeft + math.Max(0, math.Min(chartPlotW, float64(ns-span.Start)/dur*chartPlotW)))
	}
	for _, f := range faults {
		class := faultClass(f.Kind)
		x0, x1 := xOf(f.Start), xOf(max(f.End, f.Start))
		ch.Bands = append(ch.Bands, shape{Class: class, Title: f.Kind + " " + f.Target,
			X: x0, Y: chartTop, W: round1(math.Max(2, x1-x0)), H: chartPlotH})
	}
	axisY := chartTop + chartPlotH
	ch.Grid = append(ch.Grid, shape{Class: "axis", D: fmt.Sprintf("M%.1f %.1fH%.1f", chartLeft, axisY, chartLeft+chartPlotW)})
	step := niceStep(dur / 1e9 / (chartPlotW / 100))
	decimals := max(0, int(-math.Floor(math.Log10(step))))
	for k := 0; float64(k)*step*1e9 <= dur+1; k++ {
		sec := float64(k) * step
		x := xOf(span.Start + int64(sec*1e9))
		ch.Grid = append(ch.Grid, shape{Class: "axis", D: fmt.Sprintf("M%.1f %.1fv4", x, axisY)})
		ch.Ticks = append(ch.Ticks, label{X: x, Y: axisY + 16, Class: "tick", Text: strconv.FormatFloat(sec, 'f', decimals, 64) + " s"})
	}
	return ch
}

// yTick draws a horizontal grid line with its value at the left.
func (ch *chart) yTick(y float64, text string) {
	ch.Grid = append(ch.Grid, shape{Class: "grid", D: fmt.Sprintf("M%.1f %.1fH%.1f", chartLeft, y, chartLeft+chartPlotW)})
	ch.Ticks = append(ch.Ticks, label{X: chartLeft - 4, Y: y + 3.5, Class: "ytick", Text: text})
}

// latencyChart draws, per column of time, the range from the fastest to the
// slowest operation as a line and the median as a dot, on a log scale.
func latencyChart(ops map[string]*opLatencies, faults []checker.Fault, span checker.Interval, notes *[]string) *chart {
	ch := frame("latency of acquire and release over time", faults, span)
	var top int64 = 1e6
	for _, s := range latencySeries {
		if o := ops[s.name]; o != nil {
			top = max(top, slices.Max(o.ns))
		}
	}
	lo, hi := -1.0, math.Ceil(math.Log10(float64(top)/1e6)) // 0.1 ms up to a power of ten above the slowest
	yOf := func(ns int64) float64 {
		v := math.Log10(math.Max(float64(ns)/1e6, 0.1))
		return round1(chartTop + chartPlotH - (v-lo)/(hi-lo)*chartPlotH)
	}
	for p := lo; p <= hi; p++ {
		ch.yTick(yOf(int64(math.Pow(10, p)*1e6)), fmtMs(math.Pow(10, p))+" ms")
	}
	dur := span.End - span.Start
	n := int(min(chartBuckets, max(1, dur/1e6))) // no column shorter than a millisecond
	bucketNs := float64(dur) / float64(n)
	colW := chartPlotW / float64(n)
	perBucket := make([][]string, n)
	for _, s := range latencySeries {
		o := ops[s.name]
		if o == nil {
			continue
		}
		buckets := make([][]int64, n)
		for i, at := range o.at {
			b := min(n-1, max(0, int(float64(at-span.Start)/bucketNs)))
			buckets[b] = append(buckets[b], o.ns[i])
		}
		var ranges, medians strings.Builder
		for b, vals := range buckets {
			if len(vals) == 0 {
				continue
			}
			slices.Sort(vals)
			x := chartLeft + (float64(b)+.5)*colW
			med := quantile(vals, .5)
			fmt.Fprintf(&ranges, "M%.1f %.1fV%.1f", x, yOf(vals[0]), yOf(vals[len(vals)-1])+0.01)
			fmt.Fprintf(&medians, "M%.1f %.1fh.1", x, yOf(med))
			perBucket[b] = append(perBucket[b], fmt.Sprintf("%s: %d, median %s ms, max %s ms", s.name, len(vals), nsMs(med), nsMs(vals[len(vals)-1])))
		}
		ch.Paths = append(ch.Paths, shape{Class: s.class + " range", D: ranges.String()}, shape{Class: s.class + " median", D: medians.String()})
	}
	for b, lines := range perBucket {
		if lines == nil {
			continue
		}
		t0 := float64(b) * bucketNs
		ch.Hover = append(ch.Hover, shape{Class: "hover", Title: fmt.Sprintf("%.3f s to %.3f s\n%s", t0/1e9, (t0+bucketNs)/1e9, strings.Join(lines, "\n")),
			X: round1(chartLeft + float64(b)*colW), Y: chartTop, W: round1(colW), H: chartPlotH})
	}
	*notes = append(*notes, fmt.Sprintf("Latency: each column is %s ms of the run; its line spans the fastest to the slowest operation completed in it, its dot is the median.", fmtMs(bucketNs/1e6)))
	return ch
}

// grantChart draws grants per second as bars, one per second or, for long
// runs, one per longer bucket.
func grantChart(grants *opLatencies, faults []checker.Fault, span checker.Interval, notes *[]string) *chart {
	ch := frame("grants per second", faults, span)
	dur := span.End - span.Start
	bucketNs := int64(1e9)
	if dur/bucketNs > maxRateBars {
		bucketNs = int64(niceStep(float64(dur)/maxRateBars/1e9) * 1e9)
	}
	n := int((dur + bucketNs - 1) / bucketNs)
	counts := make([]int, n)
	if grants != nil {
		for _, at := range grants.at {
			counts[min(n-1, max(0, int((at-span.Start)/bucketNs)))] += grants.weight
		}
	}
	perSec := func(c int) float64 { return float64(c) / (float64(bucketNs) / 1e9) }
	top := 1.0
	for _, c := range counts {
		top = math.Max(top, perSec(c))
	}
	step := niceStep(top / 4)
	top = math.Ceil(top/step) * step
	yOf := func(v float64) float64 { return round1(chartTop + chartPlotH - v/top*chartPlotH) }
	for v := 0.0; v <= top+step/2; v += step {
		ch.yTick(yOf(v), strconv.FormatFloat(v, 'f', -1, 64)+"/s")
	}
	w := chartPlotW * float64(bucketNs) / float64(dur)
	for i, c := range counts {
		x0 := chartLeft + float64(i)*w
		x1 := math.Min(chartLeft+chartPlotW, x0+w)
		y := yOf(perSec(c))
		ch.Bars = append(ch.Bars, shape{Class: "rate", Title: fmt.Sprintf("%.0f s to %.0f s: %d grants (%s/s)",
			float64(int64(i)*bucketNs)/1e9, float64(int64(i+1)*bucketNs)/1e9, c, strconv.FormatFloat(perSec(c), 'f', 1, 64)),
			X: round1(x0), Y: y, W: round1(math.Max(0.5, x1-x0-math.Min(1, w/4))), H: round1(chartTop + chartPlotH - y)})
	}
	if bucketNs > 1e9 {
		*notes = append(*notes, fmt.Sprintf("Grants: each bar is %s s of the run, shown as a rate per second.", fmtMs(float64(bucketNs)/1e9)))
	}
	return ch
}
