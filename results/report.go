package results

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/buildinfo"
)

//go:embed report.html.tmpl
var reportTemplateText string

// reportTemplate escapes every string it is given (html/template), so keys,
// error texts and node names from a history cannot inject markup.
var reportTemplate = template.Must(template.New("report").Parse(reportTemplateText))

// maxRows caps each anomaly table and the marks linked to it, so a history
// with a hundred thousand anomalies still gives a page a browser can open.
// results.json always lists all of them.
const maxRows = 500

type reportView struct {
	Title        string // backend/variant/workload
	Nemesis      string
	Verdict      string
	VerdictClass string
	Reason       string
	// RunNote says the run was interrupted or is incomplete.
	RunNote string
	// Scenario is the incident a scripted run reproduces, if it is one.
	Scenario  *history.ScenarioInfo
	Header    []kv
	Reproduce string // the command line that runs the same test again
	// Repro is the command that reruns the run's reproduction scenario
	// (ReproFile), for a run that ended false.
	Repro    string
	ReproRef string
	Versions []kv // the servers' and lockcheck's versions
	Config   []kv
	Checks   []checkView
	Faults   tableView
	// Landing says how many faults landed, for a run with a nemesis.
	Landing  string
	Timeline *timeline
	Charts   *charts
	CSP      string
	Script   template.JS
}

type kv struct{ Key, Value string }

type checkView struct {
	Key, Title, Word, Class, Message string
	Summary                          string // the key numbers in words, as the terminal prints them
	Mark                             string // id of the check's own spot in the timeline, if any
	Numbers                          []kv
	Table                            *tableView
	Extra                            *link // a file beside the report that shows more
}

type link struct{ Href, Text string }

type tableView struct {
	Headers []string
	Rows    []rowView
	Note    string
}

// rowView is anomaly number N of a table: ID is its anchor, Mark the id of
// its spot in the timeline.
type rowView struct {
	N        int
	ID, Mark string
	Cells    []string
}

// writeReport writes report.html. linVis names porcupine's visualization
// written beside the report, or is empty when there is none; repro is the
// command that reruns the run's reproduction, or empty.
func writeReport(w io.Writer, h *history.History, res *checker.Result, linVis, repro string) error {
	v := newReportView(h, res, linVis)
	if repro != "" {
		v.Repro, v.ReproRef = repro, ReproFile
	}
	return reportTemplate.Execute(w, v)
}

func newReportView(h *history.History, res *checker.Result, linVis string) *reportView {
	cfg := h.Header.Config
	span := spanOf(h, res)
	t0 := span.Start
	v := &reportView{
		Title:        runTitle(cfg),
		Nemesis:      nemesisName(cfg),
		Verdict:      res.Valid.String(),
		VerdictClass: verdictClass(res.Valid),
		Reason:       res.Reason,
		RunNote:      resultNote(res),
		Scenario:     h.Header.Config.Scenario,
		Config:       fieldRows(cfg, t0),
		Faults:       faultTable(res.Faults, t0),
		Landing:      LandingLine(res.FaultLanding),
		Timeline:     newTimeline(h, res, span),
		Charts:       newCharts(h, res, span),
		Reproduce:    RerunCommand(cfg),
		Versions:     versionRows(cfg.Versions),
		CSP:          contentPolicy(reportScriptText),
		Script:       reportScript,
	}
	if h.Header.Started != "" {
		v.Header = append(v.Header, kv{"started", h.Header.Started})
	}
	v.Header = append(v.Header,
		kv{"history events", historyEvents(h)},
		kv{"span", fmt.Sprintf("%.3f s", float64(span.End-span.Start)/1e9)})
	if c := cfg.Client; c != nil {
		v.Header = append(v.Header, kv{"client", fmt.Sprintf("%s: %s %s on %s (%s)", c.Name, c.Library, c.Version, c.Topology, shellJoin(c.Command))})
	}
	for _, l := range libraryLosses(h) {
		v.Header = append(v.Header, kv{"lock lost", l.Line()})
	}
	for _, line := range checker.ClientViolationLines(res, t0, checker.MaxEvidenceLines) {
		v.Header = append(v.Header, kv{"client broke the protocol", line})
	}
	if h.Truncated {
		v.Header = append(v.Header, kv{"history", "cut off mid-line (the run was killed, or its disk filled up); the complete prefix was checked"})
	}
	if res.Truncated.Resource {
		v.Header = append(v.Header, kv{"resource log", "cut off mid-line (the run was killed); the complete prefix was checked"})
	}
	tables := map[string]*tableView{
		"lease_safety":     leaseTable(res.Checks.LeaseSafety.Evidence, t0),
		"double_ownership": windowTable(res.Checks.DoubleOwnership.List, t0),
		"resource":         resourceTable(res.Checks.Resource.Anomalies, t0),
		"fencing":          fenceTable(res.Checks.Fencing.Anomalies, t0),
	}
	numbers := map[string][]kv{}
	checks := reflect.ValueOf(res.Checks)
	for i := 0; i < checks.NumField(); i++ {
		name, _, _ := strings.Cut(checks.Type().Field(i).Tag.Get("json"), ",")
		numbers[name] = fieldRows(checks.Field(i).Interface(), t0)
	}
	marks := map[string]string{}
	if res.Checks.Liveness.Stall != nil {
		marks["liveness"] = "tl-stall"
	}
	if res.Checks.Linearizability.Window != nil {
		marks["linearizability"] = "tl-linearizability"
	}
	extras := map[string]*link{}
	if linVis != "" {
		extras["linearizability"] = &link{Href: linVis, Text: "porcupine's visualization of the window around it"}
	}
	for _, st := range checkStatuses(cfg, res, t0) {
		v.Checks = append(v.Checks, checkView{
			Extra: extras[st.Key],
			Key:   st.Key, Title: st.Title, Word: word(st.Outcome), Class: class(st.Outcome),
			Message: st.Message,
			Summary: st.Numbers,
			Mark:    marks[st.Key],
			Numbers: numbers[st.Key],
			Table:   tables[st.Key],
		})
	}
	return v
}

// historyEvents counts the history's events, and says what the page draws
// of a long history it holds only an excerpt of.
func historyEvents(h *history.History) string {
	n := strconv.Itoa(h.Length())
	if x := h.Excerpt; x != nil {
		n += fmt.Sprintf(" (a long history: the timeline draws the %d nemesis events and client events around the findings, the latency figures one operation in %d)", len(h.Events), x.Stride)
	}
	return n
}

// versionRows lists the servers' versions the run recorded, then the
// lockcheck that wrote the page.
func versionRows(versions map[string]string) []kv {
	var rows []kv
	for _, k := range sortedKeys(versions) {
		rows = append(rows, kv{k, versions[k]})
	}
	if _, ok := versions["lockcheck"]; !ok {
		rows = append(rows, kv{"lockcheck (this report)", buildinfo.Current().Short() + ", " + buildinfo.Current().Go})
	}
	return rows
}

func verdictClass(v checker.Validity) string {
	switch v {
	case checker.Valid:
		return "pass"
	case checker.Invalid:
		return "fail"
	}
	return "unknown"
}

// fieldRows lists a struct's plain fields under their JSON names, so that
// fields added to RunConfig or to a check later appear in the report without
// touching it. Lists of evidence are left to the anomaly tables.
func fieldRows(s any, t0 int64) []kv {
	var rows []kv
	rv := reflect.ValueOf(s)
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" || !rt.Field(i).IsExported() {
			continue
		}
		switch f := rv.Field(i).Interface().(type) {
		case string:
			if f != "" {
				rows = append(rows, kv{name, f})
			}
		case bool, int, int64:
			rows = append(rows, kv{name, fmt.Sprint(f)})
		case float64:
			rows = append(rows, kv{name, fmtMs(f)})
		case []string:
			rows = append(rows, kv{name, shellJoin(f)})
		case map[string]string:
			keys := make([]string, 0, len(f))
			for k := range f {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				rows = append(rows, kv{name + " " + k, f[k]})
			}
		case *checker.Interval:
			if f != nil {
				rows = append(rows, kv{name, relSec(f.Start, t0) + " to " + relSec(f.End, t0)})
			}
		}
	}
	return rows
}

// RerunCommand is the command line that runs the test of cfg again, as the
// report, the summary and repro.yaml's source print it: the command line
// the run recorded (which lockcheck wrote so that it parses back), quoted
// for a shell.
func RerunCommand(cfg history.RunConfig) string { return shellJoin(cfg.CommandLine) }

// shellJoin prints a command line so it can be pasted into a shell.
func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`*?[]{}()<>|&;#~!") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		quoted[i] = a
	}
	return strings.Join(quoted, " ")
}

// Anchor ids: the table row of anomaly n of a check is <check>-<n>, its
// spot in the timeline tl-<check>-<n>.
func rowID(check string, i int) string  { return check + "-" + strconv.Itoa(i+1) }
func markID(check string, i int) string { return "tl-" + rowID(check, i) }

// rows builds a table of n anomalies, capped at maxRows.
func rows(check string, n int, headers []string, cells func(int) []string) *tableView {
	if n == 0 {
		return nil
	}
	t := &tableView{Headers: append([]string{"#"}, headers...)}
	for i := 0; i < n && i < maxRows; i++ {
		t.Rows = append(t.Rows, rowView{N: i + 1, ID: rowID(check, i), Mark: markID(check, i), Cells: cells(i)})
	}
	if n > maxRows {
		t.Note = fmt.Sprintf("The first %d of %d are shown here and in the timeline; %s lists all of them.", maxRows, n, ResultsFile)
	}
	return t
}

func leaseTable(ev []checker.LeaseViolation, t0 int64) *tableView {
	return rows("lease_safety", len(ev), []string{"key", "granted to", "at", "while live for", "granted at", "certainly live until", "fences", "faults"}, func(i int) []string {
		v := ev[i]
		return []string{v.Key, v.Later.Process.String(), relSec(v.Later.OK, t0), v.Earlier.Process.String(),
			relSec(v.Earlier.OK, t0), relSec(v.Earlier.CertainEnd, t0),
			fmtFence(v.Earlier.Fence) + " then " + fmtFence(v.Later.Fence), orNone(v.Faults)}
	})
}

func windowTable(ws []checker.Window, t0 int64) *tableView {
	return rows("double_ownership", len(ws), []string{"key", "start", "ms", "processes", "writes inside", "accepted", "faults"}, func(i int) []string {
		w := ws[i]
		return []string{w.Key, relSec(w.Start, t0), fmtMs(w.Ms), strings.Join(checker.ProcessNames(w.Processes), ", "),
			strconv.Itoa(len(w.Writes)), strconv.Itoa(w.Unsafe), orNone(w.Faults)}
	})
}

func resourceTable(as []checker.ResourceAnomaly, t0 int64) *tableView {
	return rows("resource", len(as), []string{"kind", "key", "at", "process", "fence", "highest fence", "read", "resource held", "wrote", "request"}, func(i int) []string {
		a := as[i]
		return []string{a.Kind, a.Key, relSec(a.Time, t0), a.Process.String(), fmtFence(a.Fence), fmtFence(a.Highest),
			strconv.FormatInt(a.Read, 10), strconv.FormatInt(a.Prev, 10), strconv.FormatInt(a.Value, 10), a.Req}
	})
}

func fenceTable(as []checker.FenceAnomaly, t0 int64) *tableView {
	return rows("fencing", len(as), []string{"kind", "key", "granted to", "fence", "at", "after", "fence", "at"}, func(i int) []string {
		a := as[i]
		return []string{a.Kind, a.Later.Key, a.Later.Process.String(), fmtFence(a.Later.Fence), relSec(a.Later.OK, t0),
			a.Earlier.Holder(), fmtFence(a.Earlier.Fence), relSec(a.Earlier.OK, t0)}
	})
}

func faultTable(fs []checker.Fault, t0 int64) tableView {
	t := rows("fault", len(fs), []string{"kind", "target", "start", "end", "failpoint", "landed", "why"}, func(i int) []string {
		f := fs[i]
		end := "-"
		if f.End > f.Start {
			end = relSec(f.End, t0)
		}
		landed := "no"
		if f.Landed {
			landed = "yes"
		}
		return []string{f.Kind, f.Target, relSec(f.Start, t0), end, f.Failpoint, landed, f.Why}
	})
	if t == nil {
		return tableView{}
	}
	return *t
}
