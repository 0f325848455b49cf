package results

import (
	_ "embed"
	"fmt"
	"html/template"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

//go:embed sweep.html.tmpl
var sweepTemplateText string

var sweepTemplate = template.Must(template.New("sweep").Parse(sweepTemplateText))

type sweepView struct {
	CSP, Started, Limit, Command, Status, Totals string
	Seeds                                        int
	Seed                                         int64
	Heatmaps                                     []heatmap
	Frontier                                     []frontierView
	Chart                                        *frontierChart
	Decisions                                    []decisionView
	Distributions                                []distributionView
}

// heatmap is the cells of one backend, workload and faults: TTL across,
// the other settings down.
type heatmap struct {
	ID, Title string
	TTLs      []string
	Rows      []heatRow
}

type heatRow struct {
	Label string
	Cells []*heatCell // one per TTL, nil where the grid has none
}

type heatCell struct {
	// Style is the cell's colour, computed here from numbers only
	// (html/template refuses a style with a ';' from a string).
	Style                    template.CSS
	Class, Word, Title, Text string
	Href                     string // the first run's report
	Seeds                    []seedLink
}

type seedLink struct{ Label, Href, Class string }

type frontierView struct {
	Name, Axis, Fixed, At, Statement string
	Open                             bool
}

type decisionView struct {
	Name, Fixed               string
	CorruptTTL, CorruptNote   string
	WastefulTTL, WastefulNote string
	CorruptHref, WastefulHref string
}

type distributionView struct {
	Kind, Given string
	Q           Quantiles
}

// frontierChart draws each TTL frontier as a line of dots on one TTL axis
// shared by every backend: a dot per TTL tried, coloured by its outcome,
// and a ring at the frontier.
type frontierChart struct {
	Width, Height int
	Ticks         []chartTick
	Rows          []chartRow
}

type chartTick struct {
	X     float64
	Label string
}

type chartRow struct {
	Y         float64
	Label     string
	Dots      []chartDot
	Ring      *chartDot
	Statement string
}

type chartDot struct {
	X     float64
	Class string
	Title string
}

const (
	chartLabelW = 480
	chartAxisW  = 460
	chartRowH   = 26
)

func newSweepView(s *Sweep) *sweepView {
	v := &sweepView{
		CSP: contentPolicy(""), Started: s.Started, Seeds: s.Seeds, Seed: s.Seed, Command: shellJoin(s.CommandLine),
		Limit: (time.Duration(s.TimeLimitMs) * time.Millisecond).String(),
	}
	switch {
	case s.Interrupted:
		v.Status = "The sweep was interrupted; the cells show the runs it did, and runs not done count as unknown."
	case s.Finished == "":
		v.Status = "The sweep is still running; this page is rewritten after every run."
	}
	tally := map[string]int{}
	for _, c := range s.Cells {
		tally[c.Outcome]++
	}
	var parts []string
	for _, o := range []string{OutcomeSafe, OutcomeUnsafe, OutcomeUnknown, OutcomeSkipped} {
		if tally[o] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", tally[o], o))
		}
	}
	v.Totals = fmt.Sprintf("%s, %s of the grid's %d: %s.", plural(len(s.Cells), "cell"), plural(len(s.Runs), "run"), s.Grid, strings.Join(parts, ", "))
	byAt := map[int]*SweepRun{}
	for i := range s.Runs {
		byAt[s.Runs[i].At] = &s.Runs[i]
	}
	v.Heatmaps = heatmaps(s.Cells, byAt)
	name := func(backend, variant, workload string, faults []string) string {
		return fmt.Sprintf("%s/%s %s, %s", backend, variant, workload, FaultsName(faults))
	}
	for _, f := range s.Frontier {
		v.Frontier = append(v.Frontier, frontierView{Name: name(f.Backend, f.Variant, f.Workload, f.Nemesis), Axis: axisName(f.Axis),
			Fixed: f.Fixed, At: f.At, Statement: f.Statement, Open: f.Open})
	}
	v.Chart = newFrontierChart(s)
	for _, d := range s.Decisions {
		dv := decisionView{Name: name(d.Backend, d.Variant, d.Workload, d.Nemesis), Fixed: d.Fixed,
			CorruptTTL: d.Corrupts.TTL, CorruptNote: d.Corrupts.Note, WastefulTTL: d.Wasteful.TTL, WastefulNote: d.Wasteful.Note}
		dv.CorruptHref = firstReport(s.Cells, d.Corrupts.Cell, byAt)
		dv.WastefulHref = firstReport(s.Cells, d.Wasteful.Cell, byAt)
		v.Decisions = append(v.Decisions, dv)
	}
	seen := map[string]bool{}
	for _, c := range s.Cells {
		for _, d := range []struct {
			kind, given string
			q           *Quantiles
		}{{"pause", c.Settings.Pause, c.Settings.PauseQuantiles}, {"think", c.Settings.Think, c.Settings.ThinkQuantiles}} {
			if d.q == nil || seen[d.kind+d.given] || d.q.P0 == d.q.P100 {
				continue
			}
			seen[d.kind+d.given] = true
			v.Distributions = append(v.Distributions, distributionView{Kind: d.kind, Given: d.given, Q: *d.q})
		}
	}
	return v
}

// firstReport links the report of a cell's first run that has one.
func firstReport(cells []SweepCell, i int, byAt map[int]*SweepRun) string {
	if i < 0 {
		return ""
	}
	for _, at := range cells[i].Runs {
		if r := byAt[at]; r != nil && r.Dir != "" {
			return reportHref(r.Dir)
		}
	}
	return ""
}

func reportHref(dir string) string {
	return (&url.URL{Path: filepath.ToSlash(filepath.Join(dir, ReportFile))}).String()
}

func heatmaps(cells []SweepCell, byAt map[int]*SweepRun) []heatmap {
	var maps []heatmap
	index := map[string]int{}
	type place struct{ ttl, row string }
	cellAt := map[string]map[place]*SweepCell{}
	ttlMs := map[string]int64{}
	for i := range cells {
		c := &cells[i]
		title := fmt.Sprintf("%s/%s · %s · %s", c.Backend, c.Variant, c.Workload, FaultsName(c.Nemesis))
		j, ok := index[title]
		if !ok {
			j = len(maps)
			index[title] = j
			maps = append(maps, heatmap{ID: fmt.Sprintf("heatmap-%d", j+1), Title: title})
			cellAt[title] = map[place]*SweepCell{}
		}
		h := &maps[j]
		if !slices.Contains(h.TTLs, c.Settings.TTL) {
			h.TTLs = append(h.TTLs, c.Settings.TTL)
		}
		ttlMs[c.Settings.TTL] = c.Settings.TTLms
		row := fixedSettings(c.Settings, "ttl")
		if !slices.ContainsFunc(h.Rows, func(r heatRow) bool { return r.Label == row }) {
			h.Rows = append(h.Rows, heatRow{Label: row})
		}
		cellAt[title][place{c.Settings.TTL, row}] = c
	}
	for j := range maps {
		h := &maps[j]
		slices.SortStableFunc(h.TTLs, func(a, b string) int { return int(ttlMs[a] - ttlMs[b]) })
		for r := range h.Rows {
			row := &h.Rows[r]
			for _, ttl := range h.TTLs {
				c := cellAt[h.Title][place{ttl, row.Label}]
				if c == nil {
					row.Cells = append(row.Cells, nil)
					continue
				}
				row.Cells = append(row.Cells, newHeatCell(c, byAt))
			}
		}
	}
	return maps
}

// newHeatCell colours a cell by its share of false seeds: green at none,
// deepening red up to all; grey when unknown or skipped.
func newHeatCell(c *SweepCell, byAt map[int]*SweepRun) *heatCell {
	hc := &heatCell{Class: c.Outcome, Title: c.Excludes}
	switch c.Outcome {
	case OutcomeSafe:
		hc.Word = "held"
		hc.Style = "background: #dafbe1"
	case OutcomeUnsafe:
		// From a light red at a small share to a deep one at all seeds.
		f := c.ShareFalse
		r, g, b := 255-int(math.Round(48*f)), 200-int(math.Round(150*f)), 200-int(math.Round(150*f))
		hc.Word = "false"
		hc.Style = template.CSS(fmt.Sprintf("background: #%02x%02x%02x", r, g, b))
		if f > 0.5 {
			hc.Style += "; color: #fff"
		}
	case OutcomeUnknown:
		hc.Word = "unknown"
		hc.Style = "background: #eaeef2"
	default:
		hc.Word = "skipped"
		hc.Style = "background: #f6f8fa; color: #57606a"
	}
	ran := c.False + c.Held + c.Unknown
	var text []string
	if c.Outcome != OutcomeSkipped {
		text = append(text, fmt.Sprintf("%d/%d false", c.False, ran))
		if c.WindowsPerMinute > 0 {
			text = append(text, fmt.Sprintf("%.1f dup/min", c.WindowsPerMinute))
		}
		if c.StaleRefused > 0 {
			text = append(text, fmt.Sprintf("%d refused", c.StaleRefused))
		}
		if c.RecoveryP50Ms != nil {
			text = append(text, fmt.Sprintf("next grant %.0f ms", *c.RecoveryP50Ms))
		}
	}
	hc.Text = strings.Join(text, " · ")
	for _, at := range c.Runs {
		r := byAt[at]
		if r == nil || r.Dir == "" {
			continue
		}
		sl := seedLink{Label: fmt.Sprintf("s%d", r.Seed), Href: reportHref(r.Dir), Class: "unknown"}
		if r.Valid != nil {
			sl.Class = verdictClass(*r.Valid)
		}
		if hc.Href == "" {
			hc.Href = sl.Href
		}
		hc.Seeds = append(hc.Seeds, sl)
	}
	return hc
}

// newFrontierChart lays every TTL frontier on one logarithmic TTL axis.
func newFrontierChart(s *Sweep) *frontierChart {
	var rows []Frontier
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, f := range s.Frontier {
		if f.Axis == "ttl" {
			rows = append(rows, f)
		}
	}
	for _, c := range s.Cells {
		if c.Outcome != OutcomeSkipped && c.Settings.TTLms > 0 {
			lo, hi = math.Min(lo, float64(c.Settings.TTLms)), math.Max(hi, float64(c.Settings.TTLms))
		}
	}
	if len(rows) == 0 || math.IsInf(lo, 1) {
		return nil
	}
	if hi <= lo {
		lo, hi = lo/2, hi*2
	}
	x := func(ms int64) float64 {
		return round1(chartLabelW + 10 + (math.Log(float64(ms))-math.Log(lo))/(math.Log(hi)-math.Log(lo))*(chartAxisW-20))
	}
	ch := &frontierChart{Width: chartLabelW + chartAxisW + 10, Height: chartRowH*(len(rows)+1) + 10}
	ticks := map[int64]string{}
	for _, c := range s.Cells {
		if c.Outcome != OutcomeSkipped {
			ticks[c.Settings.TTLms] = c.Settings.TTL
		}
	}
	for ms, label := range ticks {
		ch.Ticks = append(ch.Ticks, chartTick{X: x(ms), Label: label})
	}
	slices.SortFunc(ch.Ticks, func(a, b chartTick) int { return cmpFloat(a.X, b.X) })
	for i, f := range rows {
		row := chartRow{Y: float64(chartRowH*(i+1) + 4), Label: fmt.Sprintf("%s/%s %s, %s, %s", f.Backend, f.Variant, f.Workload, FaultsName(f.Nemesis), f.Fixed), Statement: f.Statement}
		for _, c := range s.Cells {
			if c.Backend != f.Backend || c.Variant != f.Variant || c.Workload != f.Workload || FaultsName(c.Nemesis) != FaultsName(f.Nemesis) ||
				fixedSettings(c.Settings, "ttl") != f.Fixed || c.Outcome == OutcomeSkipped {
				continue
			}
			row.Dots = append(row.Dots, chartDot{X: x(c.Settings.TTLms), Class: c.Outcome, Title: c.Settings.TTL + ": " + c.Excludes})
		}
		if f.Cell >= 0 {
			c := s.Cells[f.Cell]
			row.Ring = &chartDot{X: x(c.Settings.TTLms), Class: "frontier", Title: "frontier: " + f.Statement}
		}
		ch.Rows = append(ch.Rows, row)
	}
	return ch
}

// DistributionQuantiles are the quantiles of a distribution (its
// Quantile method), in ms, as sweep.json and the page give them.
func DistributionQuantiles(q func(p float64) time.Duration) *Quantiles {
	ms := func(p float64) float64 { return float64(q(p)) / 1e6 }
	return &Quantiles{P0: ms(0), P50: ms(0.5), P90: ms(0.9), P99: ms(0.99), P100: ms(1)}
}
