package results

import (
	"fmt"
	"slices"
	"strings"
)

// line is the cells of one backend, workload and faults that differ along
// one axis only, in the axis's order.
type line struct {
	first *SweepCell
	fixed string
	cells []int // indices in the cells, along the axis
}

// lines groups cells along axis ("ttl" or "pause"): every other setting
// fixed.
func lines(cells []SweepCell, axis string) []line {
	var out []line
	index := map[string]int{}
	for i := range cells {
		c := &cells[i]
		if c.Outcome == OutcomeSkipped {
			continue
		}
		fixed := fixedSettings(c.Settings, axis)
		k := fmt.Sprintf("%s/%s %s %s %s", c.Backend, c.Variant, c.Workload, FaultsName(c.Nemesis), fixed)
		j, ok := index[k]
		if !ok {
			j = len(out)
			index[k] = j
			out = append(out, line{first: c, fixed: fixed})
		}
		out[j].cells = append(out[j].cells, i)
	}
	for _, l := range out {
		slices.SortStableFunc(l.cells, func(a, b int) int {
			return cmpFloat(axisValue(cells[a].Settings, axis), axisValue(cells[b].Settings, axis))
		})
	}
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// axisValue orders cells along an axis: the TTL, or the longest pause.
func axisValue(s SweepSettings, axis string) float64 {
	if axis == "pause" {
		if s.PauseQuantiles != nil {
			return s.PauseQuantiles.P100
		}
		return 0
	}
	return float64(s.TTLms)
}

// fixedSettings names the settings that stay fixed along axis.
func fixedSettings(s SweepSettings, axis string) string {
	var parts []string
	if axis != "ttl" {
		parts = append(parts, "ttl "+s.TTL)
	}
	if axis != "pause" && s.Pause != "" {
		parts = append(parts, "pause "+s.Pause)
	}
	parts = append(parts, "think "+s.Think)
	if s.Skew != "" {
		parts = append(parts, "skew "+s.Skew)
	}
	return strings.Join(parts, ", ")
}

// axes are the axes with more than one value among cells: the TTL's
// always (a frontier of one TTL says whether it held), the pause's when
// the sweep tried several.
func axes(cells []SweepCell) []string {
	pauses := map[string]bool{}
	for _, c := range cells {
		if c.Outcome != OutcomeSkipped {
			pauses[c.Settings.Pause] = true
		}
	}
	if len(pauses) > 1 {
		return []string{"ttl", "pause"}
	}
	return []string{"ttl"}
}

// Frontiers finds, along each line of cells, the frontier: along the TTL
// the smallest TTL whose cell and every cell of a greater TTL held; along
// the pause the largest pause whose cell and every cell of a smaller pause
// held. An unknown cell on the safe side leaves the frontier open.
func Frontiers(cells []SweepCell) []Frontier {
	out := []Frontier{}
	for _, axis := range axes(cells) {
		for _, l := range lines(cells, axis) {
			order := l.cells
			if axis == "pause" {
				order = slices.Clone(order)
				slices.Reverse(order) // the safe side is the short pauses
			}
			out = append(out, frontierOf(cells, l, axis, order))
		}
	}
	return out
}

// frontierOf walks a line from its safe end (the longest TTL, the
// shortest pause) while the cells hold.
func frontierOf(cells []SweepCell, l line, axis string, order []int) Frontier {
	c := l.first
	f := Frontier{Backend: c.Backend, Variant: c.Variant, Workload: c.Workload, Nemesis: c.Nemesis, Axis: axis, Fixed: l.fixed, Cell: -1}
	at := -1
	for i := len(order) - 1; i >= 0; i-- {
		cell := &cells[order[i]]
		if cell.Outcome == OutcomeUnknown {
			f.Open = true
			f.Statement = fmt.Sprintf("open: the cell at %s %s is unknown (%s), so it is neither safe nor unsafe", axisName(axis), axisLabel(cell.Settings, axis), cell.Excludes)
			if at >= 0 {
				f.Statement += fmt.Sprintf("; every seed held from %s on", axisLabel(cells[at].Settings, axis))
			}
			return f
		}
		if cell.Outcome != OutcomeSafe {
			break
		}
		at = order[i]
	}
	if at < 0 {
		f.Statement = fmt.Sprintf("none of the %ss tried held: the safest, %s, is %s (%s)", axisName(axis),
			axisLabel(cells[order[len(order)-1]].Settings, axis), cells[order[len(order)-1]].Outcome, cells[order[len(order)-1]].Excludes)
		return f
	}
	f.At, f.Cell = axisLabel(cells[at].Settings, axis), at
	side := "and above"
	if axis == "pause" {
		side = "and below"
	}
	f.Statement = fmt.Sprintf("%s %s: every seed held at %s %s (%s)", axisName(axis), f.At, f.At, side, cells[at].Excludes)
	if i := slices.Index(order, at); i > 0 {
		below := &cells[order[i-1]]
		f.Statement += fmt.Sprintf("; at %s, %s", axisLabel(below.Settings, axis), below.Excludes)
	}
	return f
}

func axisName(axis string) string {
	if axis == "pause" {
		return "pause"
	}
	return "TTL"
}

func axisLabel(s SweepSettings, axis string) string {
	if axis == "pause" {
		return s.Pause
	}
	return s.TTL
}

// Decisions are the decision table's rows: per backend, workload and
// faults at fixed other settings, the smallest TTL that held when a
// duplicate corrupts data (held with no double ownership, or held with a
// fence the resource checked) and the smallest TTL at which the lock kept
// its own promise when a duplicate is only wasteful.
func Decisions(cells []SweepCell) []Decision {
	out := []Decision{}
	for _, l := range lines(cells, "ttl") {
		c := l.first
		d := Decision{Backend: c.Backend, Variant: c.Variant, Workload: c.Workload, Nemesis: c.Nemesis, Fixed: l.fixed}
		d.Corrupts = choose(cells, l.cells, func(c *SweepCell) bool {
			return c.Outcome == OutcomeSafe && (c.Workload == "fenced" || c.WindowsPerMinute == 0)
		}, "no TTL tried held with no double ownership")
		d.Wasteful = choose(cells, l.cells, func(c *SweepCell) bool {
			return c.Outcome != OutcomeSkipped && c.Unknown == 0 && c.FailedChecks["lease_safety"] == 0 && c.FailedChecks["liveness"] == 0
		}, "no TTL tried kept the lock's own promise")
		out = append(out, d)
	}
	return out
}

// choose is the smallest TTL of a line from which on every cell is good.
func choose(cells []SweepCell, line []int, good func(*SweepCell) bool, none string) Choice {
	at := -1
	for i := len(line) - 1; i >= 0 && good(&cells[line[i]]); i-- {
		at = line[i]
	}
	if at < 0 {
		return Choice{Cell: -1, Note: none}
	}
	return Choice{TTL: cells[at].Settings.TTL, Cell: at, Note: cost(&cells[at])}
}

// cost is what a cell's setting costs, in a few words.
func cost(c *SweepCell) string {
	var parts []string
	if c.RecoveryP50Ms != nil {
		parts = append(parts, fmt.Sprintf("next grant %.0f ms after a fault (p50; max %.0f ms)", *c.RecoveryP50Ms, *c.RecoveryMaxMs))
	}
	parts = append(parts, fmt.Sprintf("acquire p99 %.1f ms", c.AcquireP99Ms), fmt.Sprintf("%.1f grants/s", c.GrantsPerSec))
	if c.WindowsPerMinute > 0 {
		parts = append(parts, fmt.Sprintf("%.1f duplicates/min", c.WindowsPerMinute))
	}
	if c.StaleRefused > 0 {
		parts = append(parts, fmt.Sprintf("%d stale writes refused", c.StaleRefused))
	}
	return strings.Join(parts, ", ")
}
