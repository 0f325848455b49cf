package results

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/buildinfo"
)

// Files of a sweep folder, <out>/<timestamp>-sweep/, which also holds one
// run directory per run of each cell.
const (
	SweepReport  = "sweep.html"
	SweepResults = "sweep.json"
	// SweepSuffix ends the name of every sweep folder.
	SweepSuffix = "-sweep"
)

// SweepSchema is the version of sweep.json; later versions only add keys.
const SweepSchema = 1

// Confidence is the confidence of every statement a sweep makes about
// what its seeds exclude.
const Confidence = 0.95

// Outcomes of a sweep cell, over its seeds.
const (
	// OutcomeSafe: every seed ran and none was false or unknown.
	OutcomeSafe = "safe"
	// OutcomeUnsafe: at least one seed was false.
	OutcomeUnsafe = "unsafe"
	// OutcomeUnknown: no seed was false, but some gave no verdict: the
	// cell is neither safe nor unsafe.
	OutcomeUnknown = "unknown"
	// OutcomeSkipped: the cell's faults need what its backend lacks.
	OutcomeSkipped = "skipped"
)

// Sweep is sweep.json: the runs of every cell of a grid over run settings,
// each cell run once per seed, and what they add up to.
type Sweep struct {
	Schema      int      `json:"schema"`
	Started     string   `json:"started"` // RFC 3339
	Finished    string   `json:"finished,omitempty"`
	CommandLine []string `json:"command_line"`
	TimeLimitMs int64    `json:"time_limit_ms"`
	// Seed is the first seed: seed k (from 0) of every cell is Seed+k,
	// so that cells differ in their settings only.
	Seed  int64 `json:"seed"`
	Seeds int   `json:"seeds"`
	// Grid is how many runs the whole sweep has (every cell times its
	// seeds), whatever share of them this folder holds.
	Grid        int  `json:"grid"`
	Interrupted bool `json:"interrupted,omitempty"`
	// Runs are the runs of this folder (a shard's share), in the grid's
	// order.
	Runs []SweepRun `json:"runs"`
	// Cells, Frontier and Decisions are computed from Runs when the file
	// is written.
	Cells     []SweepCell `json:"cells"`
	Frontier  []Frontier  `json:"frontier"`
	Decisions []Decision  `json:"decisions"`
	// Lockcheck is the build that wrote this file: the one that ran the
	// runs, or for a merge the one that merged them; Builds, in a merge,
	// the builds the shards came from when they were not all one.
	Lockcheck buildinfo.Info `json:"lockcheck"`
	Builds    []PartsBuild   `json:"builds,omitempty"`
}

// SweepSettings are a cell's coordinates besides its backend, workload and
// faults.
type SweepSettings struct {
	TTL     string `json:"ttl"`
	TTLms   int64  `json:"ttl_ms"`
	LeaseMs int64  `json:"lease_ms"` // the lease the backend grants for the TTL
	// Pause and Think are as given (a duration, a range, @FILE); their
	// quantiles are those each fault or critical section drew from.
	Pause          string     `json:"pause"`
	PauseQuantiles *Quantiles `json:"pause_quantiles,omitempty"`
	Think          string     `json:"think"`
	ThinkQuantiles *Quantiles `json:"think_quantiles,omitempty"`
	Skew           string     `json:"skew,omitempty"`
}

// Quantiles of a distribution, in ms.
type Quantiles struct {
	P0   float64 `json:"p0"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P100 float64 `json:"p100"`
}

// SweepRun is one run of a cell: a compare cell (its backend, workload,
// faults, status, run directory, verdict and counts), its settings and
// seed, and what the sweep measures of it.
type SweepRun struct {
	// At is the run's place in the whole grid, counted from 0.
	At int `json:"at"`
	Cell
	Settings SweepSettings `json:"settings"`
	Seed     int64         `json:"seed"`
	Measures *RunMeasures  `json:"measures,omitempty"`
}

// RunMeasures are what a sweep reads of one run, beside its counts.
type RunMeasures struct {
	// Failed are the checks that failed.
	Failed []string `json:"failed"`
	// WithinLease says the run is unknown only because no fault met its
	// precondition, while every fault was delivered in full (but one the
	// end of the run cut short): each pause lasted as long as it was
	// asked, within the lease. The lock held
	// against the fault as asked, which is what a sweep over the TTL
	// asks; the cell counts it as held and says so.
	WithinLease       bool      `json:"within_lease,omitempty"`
	WindowsPerMinute  float64   `json:"double_ownership_per_minute"`
	LongestWindowMs   float64   `json:"longest_window_ms"`
	StaleRefused      int       `json:"stale_writes_refused"`
	AcquireP50Ms      float64   `json:"acquire_p50_ms"`
	AcquireP99Ms      float64   `json:"acquire_p99_ms"`
	GrantsPerSec      float64   `json:"grants_per_sec"`
	DurationMs        float64   `json:"duration_ms"`
	RecoveriesMs      []float64 `json:"recoveries_ms"`
	RecoveryNeverCame int       `json:"recovery_never_came,omitempty"`
}

// SweepCell is one cell of the grid over its seeds.
type SweepCell struct {
	Backend  string        `json:"backend"`
	Variant  string        `json:"variant"`
	Workload string        `json:"workload"`
	Nemesis  []string      `json:"nemesis"`
	Settings SweepSettings `json:"settings"`
	Outcome  string        `json:"outcome"`
	// Seeds is how many runs the cell has in this folder; False,
	// Unknown (errors and runs not run included) and Held (true, or
	// within the lease) count them.
	Seeds       int     `json:"seeds"`
	False       int     `json:"false"`
	Unknown     int     `json:"unknown"`
	Held        int     `json:"held"`
	WithinLease int     `json:"within_lease,omitempty"`
	ShareFalse  float64 `json:"share_false"`
	// Excludes says what the seeds show, at 95 % confidence.
	Excludes string `json:"excludes"`
	// FailedChecks counts the seeds each check failed in.
	FailedChecks     map[string]int `json:"failed_checks"`
	WindowsPerMinute float64        `json:"double_ownership_per_minute"`
	LongestWindowMs  float64        `json:"longest_window_ms"`
	StaleRefused     int            `json:"stale_writes_refused"`
	// Recovery is the availability cost: the time from the start of each
	// fault (a holder paused or killed, a node killed, a failover) to the
	// next grant, over every fault of every seed.
	RecoveryP50Ms     *float64 `json:"recovery_p50_ms"`
	RecoveryMaxMs     *float64 `json:"recovery_max_ms"`
	RecoveryNeverCame int      `json:"recovery_never_came,omitempty"`
	AcquireP50Ms      float64  `json:"acquire_p50_ms"`
	AcquireP99Ms      float64  `json:"acquire_p99_ms"`
	GrantsPerSec      float64  `json:"grants_per_sec"`
	Why               string   `json:"why,omitempty"` // a skipped cell's reason
	// Runs are the At of the cell's runs in this folder.
	Runs []int `json:"runs"`
}

// Frontier is, for one backend, workload and faults at fixed other
// settings, the smallest TTL at which the cell and every cell of a
// greater TTL held (or along the pause, the largest pause).
type Frontier struct {
	Backend  string   `json:"backend"`
	Variant  string   `json:"variant"`
	Workload string   `json:"workload"`
	Nemesis  []string `json:"nemesis"`
	// Axis is "ttl" or "pause"; Fixed names the other settings.
	Axis  string `json:"axis"`
	Fixed string `json:"fixed"`
	// At is the frontier's value, "" when no value tried held (or when
	// an unknown cell leaves it open).
	At string `json:"at"`
	// Statement says where the frontier lies and what the seeds of the
	// cell there exclude; Open says an unknown cell left it undecided.
	Statement string `json:"statement"`
	Open      bool   `json:"open,omitempty"`
	// Cell is the index in Cells of the cell at the frontier, -1 when
	// there is none.
	Cell int `json:"cell"`
}

// Decision is a row of the decision table, in the articles' terms: for one
// backend and faults at fixed other settings, the smallest TTL that held
// when duplicates corrupt data, and the one that held when they are only
// wasteful, each with its cost.
type Decision struct {
	Backend  string   `json:"backend"`
	Variant  string   `json:"variant"`
	Workload string   `json:"workload"`
	Nemesis  []string `json:"nemesis"`
	Fixed    string   `json:"fixed"`
	// Corrupts: every seed held with no double ownership, or held with a
	// fence the resource checked (what the articles require when a
	// duplicate is a correctness failure). Wasteful: the lock kept its own
	// promise (no lease violation, never stuck), duplicates allowed.
	Corrupts Choice `json:"duplicates_corrupt"`
	Wasteful Choice `json:"duplicates_wasteful"`
}

// Choice is one column of a decision: the TTL chosen (the cell), or none.
type Choice struct {
	TTL  string `json:"ttl"`
	Cell int    `json:"cell"` // index in Cells, -1 for none
	Note string `json:"note"`
}

// NewSweepDir creates <out>/<YYYYMMDD-HHMMSS>-sweep/.
func NewSweepDir(out string, now time.Time) (string, error) {
	return newNumberedDir(out, now.Format(folderTimeLayout)+SweepSuffix, "sweep")
}

// WriteSweep computes the cells, the frontier and the decisions from the
// runs and writes sweep.json, sweep.html and junit.xml into dir. It is
// called after every run, so an interrupted sweep keeps the runs it did.
func WriteSweep(dir string, s *Sweep) error {
	if s.Runs == nil {
		s.Runs = []SweepRun{}
	}
	s.Schema = SweepSchema
	if s.Lockcheck.Go == "" {
		s.Lockcheck = buildinfo.Current()
	}
	s.Cells = SweepCells(s.Runs)
	s.Frontier = Frontiers(s.Cells)
	s.Decisions = Decisions(s.Cells)
	return writeMatrixFiles(dir, SweepResults, s,
		func(w io.Writer) error { return writeSweepJUnit(w, dir, s) },
		SweepReport, func(w io.Writer) error { return sweepTemplate.Execute(w, newSweepView(s)) })
}

// ReadSweep reads sweep.json from a sweep folder.
func ReadSweep(dir string) (*Sweep, error) {
	var s Sweep
	return &s, readJSON(dir, SweepResults, &s)
}

// CellKey names a run's cell: what two runs of one cell share.
func (r *SweepRun) CellKey() string {
	return cellKey(r.Backend, r.Variant, r.Workload, r.Nemesis, r.Settings)
}

func cellKey(backend, variant, workload string, faults []string, s SweepSettings) string {
	k := fmt.Sprintf("%s/%s %s %s ttl=%s", backend, variant, workload, FaultsName(faults), s.TTL)
	if s.Pause != "" {
		k += " pause=" + s.Pause
	}
	k += " think=" + s.Think
	if s.Skew != "" {
		k += " skew=" + s.Skew
	}
	return k
}

// Measure reads what a sweep measures of a run from its directory: its
// results and its history. r must have Ran.
func Measure(runDir string, r *Results) (*RunMeasures, error) {
	ch := &r.Checks
	m := &RunMeasures{
		Failed: []string{}, LongestWindowMs: ch.DoubleOwnership.MaxMs, StaleRefused: ch.Resource.StaleWritesRefused,
		AcquireP50Ms: ch.Liveness.AcquireP50Ms, AcquireP99Ms: ch.Liveness.AcquireP99Ms, GrantsPerSec: ch.Liveness.GrantsPerSec,
		RecoveriesMs: []float64{},
	}
	ctx := checker.JudgeContext{Fenced: r.Config.Guarded()}
	settled := true
	for _, nc := range ch.List() {
		switch nc.Check.Judge(ctx).Status {
		case checker.StatusFailed:
			m.Failed = append(m.Failed, nc.Key)
			settled = false
		case checker.StatusUnknown:
			settled = false
		}
	}
	f, err := os.Open(filepath.Join(runDir, HistoryFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var scan runScan
	if _, err := history.Stream(f, func(history.Header) error { return nil }, scan.event); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(runDir, HistoryFile), err)
	}
	scan.finish(m)
	if m.DurationMs > 0 {
		m.WindowsPerMinute = float64(ch.DoubleOwnership.Windows) / (m.DurationMs / 60000)
	}
	// Held within the lease: the verdict is unknown only because no fault
	// met its precondition, and every fault was delivered in full but
	// those the end of the run cut short.
	full, cut := scan.delivered()
	m.WithinLease = r.Valid == checker.Unknown && settled && len(r.UnknownReasons) == 1 &&
		r.FaultLanding.Landed == 0 && r.FaultLanding.Injected > 0 && full > 0 && full+cut >= r.FaultLanding.Injected
	return m, nil
}

// runScan follows a run's history for the availability cost: when each
// fault began and when the next grant came, and whether each pause lasted
// as long as it was asked.
type runScan struct {
	first, last int64
	seen        bool
	// waiting are the start times of faults not yet followed by a grant.
	waiting   []int64
	recovered []float64
	// paused are the open pauses by target.
	paused map[string]pause
	pauses []pause
	kills  int
}

// pause is one stop of a target: when it began, how long it was asked to
// last and how long it did (-1 while open).
type pause struct{ start, asked, held int64 }

func (s *runScan) event(e *history.Event) error {
	if !s.seen {
		s.first, s.seen = e.Time, true
	}
	s.last = e.Time
	if e.Process != history.Nemesis {
		if e.Type == history.OK && e.F == history.FAcquire {
			for _, t := range s.waiting {
				s.recovered = append(s.recovered, float64(e.Time-t)/1e6)
			}
			s.waiting = s.waiting[:0]
		}
		return nil
	}
	var target string
	var asked int64
	if e.Value != nil {
		target, asked = e.Value.Target, e.Value.DurationMs*1e6
	}
	switch v := history.VerbOf(e.F); {
	case e.F == history.NemPause:
		if s.paused == nil {
			s.paused = map[string]pause{}
		}
		s.paused[target] = pause{start: e.Time, asked: asked, held: -1}
		s.waiting = append(s.waiting, e.Time)
	case e.F == history.NemResume:
		if p, ok := s.paused[target]; ok {
			p.held = e.Time - p.start
			s.pauses = append(s.pauses, p)
			delete(s.paused, target)
		}
	case e.F == history.NemKill:
		s.kills++
		s.waiting = append(s.waiting, e.Time)
	case v.Role == history.Starts || v.Role == history.Point:
		s.waiting = append(s.waiting, e.Time)
	}
	return nil
}

// delivered counts the faults delivered in full (each pause held as long
// as asked, a few ms of timer slack aside, and each kill) and those the
// end of the run cut short: only the end of the run ends a pause early
// (the nemesis's context), so that is the last pause, if it fell short.
func (s *runScan) delivered() (full, cut int) {
	for _, p := range s.paused {
		p.held = -1
		s.pauses = append(s.pauses, p)
	}
	slices.SortFunc(s.pauses, func(a, b pause) int { return cmp.Compare(a.start, b.start) })
	for i, p := range s.pauses {
		switch {
		case p.held >= 0 && p.held+5e6 >= p.asked:
			full++
		case i == len(s.pauses)-1:
			cut++
		}
	}
	return full + s.kills, cut
}

func (s *runScan) finish(m *RunMeasures) {
	m.RecoveriesMs = append(m.RecoveriesMs, s.recovered...)
	m.RecoveryNeverCame = len(s.waiting)
	m.DurationMs = float64(s.last-s.first) / 1e6
}

// SweepCells groups runs into their cells, in the grid's order, and adds
// each cell up.
func SweepCells(runs []SweepRun) []SweepCell {
	var cells []SweepCell
	index := map[string]int{}
	sorted := slices.Clone(runs)
	slices.SortStableFunc(sorted, func(a, b SweepRun) int { return a.At - b.At })
	for _, r := range sorted {
		k := r.CellKey()
		i, ok := index[k]
		if !ok {
			i = len(cells)
			index[k] = i
			cells = append(cells, SweepCell{Backend: r.Backend, Variant: r.Variant, Workload: r.Workload, Nemesis: r.Nemesis,
				Settings: r.Settings, FailedChecks: map[string]int{}})
		}
		c := &cells[i]
		c.Runs = append(c.Runs, r.At)
		c.Seeds++
		switch {
		case r.Status == CellSkipped:
			c.Why = r.Why
		case r.Status != CellRan || r.Valid == nil:
			c.Unknown++
		case *r.Valid == checker.Invalid:
			c.False++
		case *r.Valid == checker.Valid:
			c.Held++
		case r.Measures != nil && r.Measures.WithinLease:
			c.Held++
			c.WithinLease++
		default:
			c.Unknown++
		}
	}
	byAt := map[int]*SweepRun{}
	for i := range sorted {
		byAt[sorted[i].At] = &sorted[i]
	}
	for i := range cells {
		addUp(&cells[i], byAt)
	}
	return cells
}

// addUp computes a cell's outcome and measures from its runs.
func addUp(c *SweepCell, byAt map[int]*SweepRun) {
	var recoveries, p50s, p99s, grants, perMin []float64
	for _, at := range c.Runs {
		r := byAt[at]
		m := r.Measures
		if m == nil {
			continue
		}
		for _, k := range m.Failed {
			c.FailedChecks[k]++
		}
		recoveries = append(recoveries, m.RecoveriesMs...)
		c.RecoveryNeverCame += m.RecoveryNeverCame
		p50s, p99s = append(p50s, m.AcquireP50Ms), append(p99s, m.AcquireP99Ms)
		grants, perMin = append(grants, m.GrantsPerSec), append(perMin, m.WindowsPerMinute)
		c.LongestWindowMs = max(c.LongestWindowMs, m.LongestWindowMs)
		c.StaleRefused += m.StaleRefused
	}
	ran := c.False + c.Held + c.Unknown
	switch {
	case ran == 0 && c.Why != "":
		c.Outcome = OutcomeSkipped
		c.Excludes = "skipped: " + c.Why
		return
	case c.False > 0:
		c.Outcome = OutcomeUnsafe
	case c.Unknown > 0 || ran == 0:
		c.Outcome = OutcomeUnknown
	default:
		c.Outcome = OutcomeSafe
	}
	if ran > 0 {
		c.ShareFalse = float64(c.False) / float64(ran)
	}
	c.Excludes = Excludes(c.False, c.Held, c.Unknown)
	if c.WithinLease > 0 {
		c.Excludes += fmt.Sprintf(" (%d of the seeds held with every fault delivered in full but within the lease: the fault's own moment, a lease running out under it, never came)", c.WithinLease)
	}
	if len(recoveries) > 0 {
		p50, mx := quantileOf(recoveries, 0.5), slices.Max(recoveries)
		c.RecoveryP50Ms, c.RecoveryMaxMs = &p50, &mx
	}
	c.AcquireP50Ms, c.AcquireP99Ms = quantileOf(p50s, 0.5), maxOf(p99s)
	c.GrantsPerSec, c.WindowsPerMinute = mean(grants), mean(perMin)
}

// Excludes says what a cell's seeds show at 95 % confidence: with none
// false of n, the failure rates above 1-0.05^(1/n) are excluded (26 % for
// n = 10); with k false, the cell is unsafe and the rates below the
// Clopper-Pearson lower bound are excluded. Seeds with no verdict leave
// the cell neither safe nor unsafe.
func Excludes(falseRuns, held, unknown int) string {
	n := falseRuns + held
	switch {
	case falseRuns > 0:
		lo := binomialLowerBound(falseRuns, n+unknown)
		s := fmt.Sprintf("%d of %d false: unsafe; a failure rate below %s is excluded at 95 %% confidence", falseRuns, n+unknown, percent(lo))
		if unknown > 0 {
			s += fmt.Sprintf(" (%d without a verdict counted as not false)", unknown)
		}
		return s
	case unknown > 0 && n == 0:
		return fmt.Sprintf("no verdict in %d seeds: neither safe nor unsafe", unknown)
	case unknown > 0:
		return fmt.Sprintf("0 of %d false, but %d without a verdict: neither safe nor unsafe", n, unknown)
	case n == 0:
		return "no seed ran"
	}
	return fmt.Sprintf("0 of %d false: a failure rate above %s is excluded at 95 %% confidence", n, percent(1-math.Pow(1-Confidence, 1/float64(n))))
}

// binomialLowerBound is the one-sided 95 % lower bound on a failure rate
// with k failures in n runs: the rate p at which k or more failures have
// probability 0.05.
func binomialLowerBound(k, n int) float64 {
	if k == 0 {
		return 0
	}
	lo, hi := 0.0, 1.0
	for range 60 {
		p := (lo + hi) / 2
		if tailAtLeast(k, n, p) < 1-Confidence {
			lo = p
		} else {
			hi = p
		}
	}
	return lo
}

// tailAtLeast is P(X >= k) for X binomial(n, p).
func tailAtLeast(k, n int, p float64) float64 {
	sum := 0.0
	for i := k; i <= n; i++ {
		lg, _ := math.Lgamma(float64(n + 1))
		li, _ := math.Lgamma(float64(i + 1))
		lni, _ := math.Lgamma(float64(n - i + 1))
		sum += math.Exp(lg - li - lni + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return sum
}

func percent(p float64) string {
	v := p * 100
	if v >= 10 {
		return fmt.Sprintf("%.0f %%", math.Floor(v+0.5))
	}
	return fmt.Sprintf("%.1f %%", v)
}

// quantileOf is the q-quantile of unsorted values (nearest rank), 0 for
// none.
func quantileOf(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return quantile(s, q)
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

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

// writeSweepJUnit gathers the junit.xml of every run, one suite per run
// named after its cell and seed; a run that did not run is a suite of one
// case, skipped or an error.
func writeSweepJUnit(w io.Writer, dir string, s *Sweep) error {
	doc := junitSuites{Name: "lockcheck sweep"}
	for _, r := range s.Runs {
		name := fmt.Sprintf("lockcheck sweep %s seed %d", r.CellKey(), r.Seed)
		suite, err := cellSuite(dir, r.Cell, "lockcheck.sweep."+r.Backend)
		if err != nil {
			return fmt.Errorf("junit.xml of %s: %v", name, err)
		}
		suite.Name = name
		doc.add(suite)
	}
	return encodeJUnit(w, doc)
}
