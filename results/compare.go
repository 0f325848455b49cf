package results

import (
	_ "embed"
	"encoding/xml"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/internal/buildinfo"
)

// Files of a comparison folder, <out>/<timestamp>-compare/, which also holds
// one run directory per cell that ran.
const (
	CompareReport  = "compare.html"
	CompareResults = "compare.json"
	// CompareSuffix ends the name of every comparison folder.
	CompareSuffix = "-compare"
)

// CompareSchema is the version of compare.json; later versions only add keys.
const CompareSchema = 1

// Cell statuses in compare.json.
const (
	CellRan     = "ran"     // the run finished (or was cut short) and was checked
	CellSkipped = "skipped" // the combination makes no sense; Why says why
	CellError   = "error"   // the run could not be done; Why is the error
	CellNotRun  = "not-run" // the comparison was interrupted before this cell
)

// Comparison is compare.json: every cell of a backend × workload × fault
// matrix, in the order they ran.
type Comparison struct {
	Schema      int      `json:"schema"`
	Started     string   `json:"started"` // RFC 3339
	Finished    string   `json:"finished,omitempty"`
	CommandLine []string `json:"command_line"`
	TimeLimitMs int64    `json:"time_limit_ms"`
	Seed        int64    `json:"seed"`
	Interrupted bool     `json:"interrupted,omitempty"`
	Cells       []Cell   `json:"cells"`
	// Lockcheck is the build that wrote this file: the one that ran the
	// cells, or for a merge the one that merged them.
	Lockcheck buildinfo.Info `json:"lockcheck"`
	// Builds, in a merge, are the builds the merged comparisons came from,
	// each with the parts it made; absent when they all came from one.
	Builds []PartsBuild `json:"builds,omitempty"`
}

// PartsBuild is one build of lockcheck and the merged parts it made.
type PartsBuild struct {
	Lockcheck buildinfo.Info `json:"lockcheck"`
	Parts     []string       `json:"parts"`
}

// Cell is one combination of the matrix and what became of it.
type Cell struct {
	Backend  string   `json:"backend"`
	Variant  string   `json:"variant"`
	Workload string   `json:"workload"`
	Nemesis  []string `json:"nemesis"`
	Status   string   `json:"status"`
	Why      string   `json:"why,omitempty"`
	// Dir is the cell's run directory, relative to the comparison folder.
	Dir     string            `json:"dir,omitempty"`
	Valid   *checker.Validity `json:"valid,omitempty"`
	Reason  string            `json:"reason,omitempty"`
	Counts  *CellCounts       `json:"counts,omitempty"`
	Seconds float64           `json:"seconds,omitempty"` // wall time of the cell, run and check
}

// CellCounts are the numbers a comparison shows side by side.
type CellCounts struct {
	LeaseViolations     int     `json:"lease_violations"`
	Windows             int     `json:"double_ownership_windows"`
	UnsafeWrites        int     `json:"unsafe_writes"`
	LostUpdates         int     `json:"lost_updates"`
	StaleWritesAccepted int     `json:"stale_writes_accepted"`
	StaleWritesRefused  int     `json:"stale_writes_refused"`
	FenceAnomalies      int     `json:"fence_anomalies"`
	Linearizability     string  `json:"linearizability"`
	Grants              int     `json:"grants"`
	GrantsPerSec        float64 `json:"grants_per_sec"`
	LongestStallMs      float64 `json:"longest_stall_ms"`
	StuckUntilEnd       bool    `json:"stuck_until_end"`
	// FaultsInjected and FaultsLanded are results.json's fault_landing.
	FaultsInjected int `json:"faults_injected"`
	FaultsLanded   int `json:"faults_landed"`
}

// Ran fills a cell from the results its run wrote.
func (c *Cell) Ran(r *Results) {
	ch := &r.Checks
	v := r.Valid
	c.Status, c.Valid, c.Reason = CellRan, &v, r.Reason
	if note := runNote(r.Interrupted, r.Incomplete, r.InterruptedBy); note != "" {
		c.Reason = note + " " + c.Reason
	}
	c.Counts = &CellCounts{
		LeaseViolations: ch.LeaseSafety.Violations, Windows: ch.DoubleOwnership.Windows,
		UnsafeWrites: ch.DoubleOwnership.UnsafeWrites, LostUpdates: ch.Resource.LostUpdates,
		StaleWritesAccepted: ch.Resource.StaleWritesAccepted, StaleWritesRefused: ch.Resource.StaleWritesRefused,
		FenceAnomalies: ch.Fencing.Regressions + ch.Fencing.Duplicates, Linearizability: ch.Linearizability.Result,
		Grants: ch.Liveness.Grants, GrantsPerSec: ch.Liveness.GrantsPerSec, LongestStallMs: ch.Liveness.LongestStallMs,
		StuckUntilEnd:  ch.Liveness.StuckUntilEnd,
		FaultsInjected: r.FaultLanding.Injected, FaultsLanded: r.FaultLanding.Landed,
	}
}

// NewCompareDir creates <out>/<YYYYMMDD-HHMMSS>-compare/, with a -2, -3, ...
// suffix when a comparison started in the same second.
func NewCompareDir(out string, now time.Time) (string, error) {
	return newNumberedDir(out, now.Format(folderTimeLayout)+CompareSuffix, "comparison")
}

// newNumberedDir creates the folder base under out, or base-2, base-3, ...
// when it is taken (what names it in errors), and returns its path.
func newNumberedDir(out, base, what string) (string, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("create output folder: %w", err)
	}
	name := base
	for n := 2; ; n++ {
		// Mkdir, not MkdirAll: it fails when the folder exists, which is how
		// two concurrent runs avoid picking the same name.
		err := os.Mkdir(filepath.Join(out, name), 0o755)
		if err == nil {
			return filepath.Join(out, name), nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("create %s folder: %w", what, err)
		}
		name = base + "-" + fmt.Sprint(n)
	}
}

// WriteComparison writes compare.json, compare.html and junit.xml into the
// comparison folder dir. It is called after every cell, so an interrupted
// comparison still leaves pages for the cells that ran.
func WriteComparison(dir string, c *Comparison) error {
	if c.Cells == nil {
		c.Cells = []Cell{}
	}
	c.Schema = CompareSchema
	if c.Lockcheck.Go == "" {
		c.Lockcheck = buildinfo.Current()
	}
	return writeMatrixFiles(dir, CompareResults, c,
		func(w io.Writer) error { return writeCompareJUnit(w, dir, c) },
		CompareReport, func(w io.Writer) error { return compareTemplate.Execute(w, newCompareView(c)) })
}

// writeMatrixFiles writes the three files of a folder of many runs (a
// comparison, a sweep): its JSON, its junit.xml and its page, each
// atomically, in that order.
func writeMatrixFiles(dir, jsonName string, v any, junit func(io.Writer) error, page string, render func(io.Writer) error) error {
	if err := writeJSON(dir, jsonName, v); err != nil {
		return err
	}
	if err := writeFileAtomic(dir, JUnitFile, junit); err != nil {
		return err
	}
	return writeFileAtomic(dir, page, render)
}

// ReadComparison reads compare.json from a comparison folder.
func ReadComparison(dir string) (*Comparison, error) {
	var c Comparison
	return &c, readJSON(dir, CompareResults, &c)
}

// FaultsName names a cell's faults as the pages show them.
func FaultsName(faults []string) string {
	if len(faults) == 0 {
		return "none"
	}
	return strings.Join(faults, "+")
}

// writeCompareJUnit gathers the junit.xml of every cell's run, one suite per
// cell and a test case per check, so CI shows each failing check of each
// cell with its reason. Cells that did not run are a suite of one case:
// skipped with its reason, or an error.
func writeCompareJUnit(w io.Writer, dir string, c *Comparison) error {
	doc := junitSuites{Name: "lockcheck compare"}
	for _, cell := range c.Cells {
		name := fmt.Sprintf("lockcheck %s/%s/%s %s", cell.Backend, cell.Variant, cell.Workload, FaultsName(cell.Nemesis))
		suite, err := cellSuite(dir, cell, "lockcheck.compare."+cell.Backend)
		if err != nil {
			return fmt.Errorf("junit.xml of cell %s: %v", name, err)
		}
		suite.Name = name
		doc.add(suite)
	}
	return encodeJUnit(w, doc)
}

// cellSuite is the test suite of a cell that ran: its run's junit.xml
// suite, read from dir; or, for one that did not, a suite of one case
// (classname) skipped with its reason, or an error.
func cellSuite(dir string, cell Cell, classname string) (junitSuite, error) {
	if cell.Status == CellRan {
		var runDoc junitSuites
		b, err := os.ReadFile(filepath.Join(dir, cell.Dir, JUnitFile))
		if err == nil {
			err = xml.Unmarshal(b, &runDoc)
		}
		if err == nil && len(runDoc.Suites) != 1 {
			err = fmt.Errorf("%d test suites, not one", len(runDoc.Suites))
		}
		if err != nil {
			return junitSuite{}, err
		}
		return runDoc.Suites[0], nil
	}
	var suite junitSuite
	tc := junitCase{Name: "cell", Classname: classname}
	problem := &junitProblem{Message: cell.Status + ": " + cell.Why}
	switch cell.Status {
	case CellSkipped:
		tc.Skipped = problem
		suite.Skipped = 1
	default:
		tc.Error = problem
		suite.Errors = 1
	}
	suite.Cases, suite.Tests = []junitCase{tc}, 1
	return suite, nil
}

//go:embed compare.html.tmpl
var compareTemplateText string

var compareTemplate = template.Must(template.New("compare").Parse(compareTemplateText))

type compareView struct {
	CSP        string
	Started    string
	Limit      string
	Seed       int64
	Command    string
	Totals     string
	Status     string // interrupted, or still running
	Workloads  []string
	Backends   []backendRows
	Cells      []cellView
	Conclusion []string
}

// backendRows are a backend's rows of the matrix: one per fault set.
type backendRows struct {
	Name string
	Rows []faultRow
}

type faultRow struct {
	Faults string
	Cells  []*cellView // one per workload, nil where the matrix has no cell
}

type cellView struct {
	Backend, Variant, Workload, Faults string
	Class, Word                        string // colour and verdict
	Short                              string // the key counts in a few words
	Why                                string
	Href                               string // the run's report
	Reason                             string
	Counts                             *CellCounts
	Seconds                            string
}

func newCompareView(c *Comparison) *compareView {
	v := &compareView{
		CSP: contentPolicy(""), Started: c.Started, Seed: c.Seed, Command: shellJoin(c.CommandLine),
		Limit: (time.Duration(c.TimeLimitMs) * time.Millisecond).String(),
	}
	switch {
	case c.Interrupted:
		v.Status = "The comparison was interrupted; cells not run are marked."
	case c.Finished == "":
		v.Status = "The comparison is still running; this page is rewritten after every cell."
	}
	tally := map[string]int{}
	byKey := map[[3]string]*cellView{}
	var backends, workloads []string
	faultsOf := map[string][]string{}
	seen := map[string]bool{}
	for _, cell := range c.Cells {
		cv := newCellView(cell)
		tally[cv.Word]++
		v.Cells = append(v.Cells, cv)
		name := cell.Backend + "/" + cell.Variant
		if !seen["b"+name] {
			seen["b"+name] = true
			backends = append(backends, name)
		}
		if !seen["w"+cell.Workload] {
			seen["w"+cell.Workload] = true
			workloads = append(workloads, cell.Workload)
		}
		if !seen["f"+name+"\x00"+cv.Faults] {
			seen["f"+name+"\x00"+cv.Faults] = true
			faultsOf[name] = append(faultsOf[name], cv.Faults)
		}
	}
	for i := range v.Cells {
		cv := &v.Cells[i]
		byKey[[3]string{cv.Backend + "/" + cv.Variant, cv.Faults, cv.Workload}] = cv
	}
	v.Workloads = workloads
	for _, b := range backends {
		br := backendRows{Name: b}
		for _, f := range faultsOf[b] {
			row := faultRow{Faults: f}
			for _, w := range workloads {
				row.Cells = append(row.Cells, byKey[[3]string{b, f, w}])
			}
			br.Rows = append(br.Rows, row)
		}
		v.Backends = append(v.Backends, br)
	}
	var parts []string
	for _, word := range []string{"true", "false", "unknown", "skipped", "error", "not run"} {
		if n := tally[word]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, word))
		}
	}
	v.Totals = fmt.Sprintf("%s: %s.", plural(len(c.Cells), "cell"), strings.Join(parts, ", "))
	v.Conclusion = conclusions(v.Backends, workloads)
	return v
}

// conclusions say per backend and workload whether every fault tried kept
// the data safe: the sentence a team reads before adopting a backend.
func conclusions(backends []backendRows, workloads []string) []string {
	var out []string
	for _, b := range backends {
		for wi, w := range workloads {
			var safe, unsafe, unsure []string
			for _, row := range b.Rows {
				cv := row.Cells[wi]
				if cv == nil {
					continue
				}
				switch cv.Word {
				case "true":
					safe = append(safe, row.Faults)
				case "false":
					unsafe = append(unsafe, row.Faults)
				case "unknown", "error":
					unsure = append(unsure, row.Faults)
				}
			}
			var s string
			switch {
			case len(safe)+len(unsafe)+len(unsure) == 0:
				continue
			case len(unsafe) > 0:
				s = fmt.Sprintf("%s, %s: unsafe under %s", b.Name, w, checker.JoinAnd(unsafe))
				if len(safe) > 0 {
					s += fmt.Sprintf("; safe under %s", checker.JoinAnd(safe))
				}
			case len(unsure) > 0:
				s = fmt.Sprintf("%s, %s: no violation found, but no verdict under %s", b.Name, w, checker.JoinAnd(unsure))
			default:
				s = fmt.Sprintf("%s, %s: safe under every fault tried (%s)", b.Name, w, checker.JoinAnd(safe))
			}
			out = append(out, s+".")
		}
	}
	return out
}

func newCellView(c Cell) cellView {
	cv := cellView{Backend: c.Backend, Variant: c.Variant, Workload: c.Workload, Faults: FaultsName(c.Nemesis),
		Why: c.Why, Reason: c.Reason, Counts: c.Counts}
	if c.Seconds > 0 {
		cv.Seconds = fmt.Sprintf("%.0f s", c.Seconds)
	}
	switch c.Status {
	case CellRan:
		cv.Word, cv.Class = c.Valid.String(), verdictClass(*c.Valid)
		cv.Href = (&url.URL{Path: filepath.ToSlash(filepath.Join(c.Dir, ReportFile))}).String()
		cv.Short = shortCounts(c.Counts)
	case CellSkipped:
		cv.Word, cv.Class = "skipped", "skipped"
	case CellNotRun:
		cv.Word, cv.Class = "not run", "skipped"
	default:
		cv.Word, cv.Class = "error", "unknown"
	}
	return cv
}

// shortCounts names the anomalies a cell found, worst first, or says there
// were none.
func shortCounts(k *CellCounts) string {
	var parts []string
	add := func(n int, one, many string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+one)
		case n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", n, many))
		}
	}
	add(k.LeaseViolations, "lease violation", "lease violations")
	add(k.LostUpdates, "lost update", "lost updates")
	add(k.StaleWritesAccepted, "stale write accepted", "stale writes accepted")
	add(k.FenceAnomalies, "fence anomaly", "fence anomalies")
	add(k.Windows, "double-ownership window", "double-ownership windows")
	add(k.StaleWritesRefused, "stale write refused", "stale writes refused")
	if k.Linearizability != "" && k.Linearizability != checker.Linearizable {
		parts = append(parts, "linearizability "+k.Linearizability)
	}
	if k.StuckUntilEnd {
		parts = append(parts, "stuck")
	}
	if len(parts) == 0 {
		parts = append(parts, "no anomaly")
	}
	return strings.Join(parts, ", ") + fmt.Sprintf("; %.0f grants/s", k.GrantsPerSec)
}
