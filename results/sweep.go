package results

import (
	"fmt"
	"io"
	"time"

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
