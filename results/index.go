package results

import (
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// IndexEntry is one row of the store's index: a run, a comparison or a
// soak.
type IndexEntry struct {
	Kind     string // "run", "compare", "sweep" or "soak"
	Time     time.Time
	Path     string // the folder, relative to the store, with forward slashes
	Href     string // its page, relative to the store's root URL
	Backend  string
	Workload string
	Faults   string
	Verdict  string // true, false, unknown, "not checked"; for a comparison its tally
	Class    string // colour: pass, fail, unknown, skipped
	Summary  string // the reason in one sentence
	Parent   string // the comparison a run belongs to, if any
}

// ScanStore lists the runs, comparisons and soaks under store, newest
// first: every run and soak directory at its top, and each comparison
// followed by the runs of its cells. A folder that cannot be read is listed
// with what is known of it, never dropped.
func ScanStore(store string) ([]IndexEntry, error) {
	entries, err := os.ReadDir(store)
	if err != nil {
		return nil, err
	}
	var out []IndexEntry
	groupTime := map[string]time.Time{} // a comparison's time, which its runs sort by
	for _, e := range entries {
		// Symlinks (latest) point at folders listed under their own name.
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(store, e.Name())
		if _, err := os.Stat(filepath.Join(dir, CompareResults)); err == nil {
			ce := compareEntry(dir, e.Name())
			groupTime[ce.Path] = ce.Time
			out = append(out, ce)
			out = append(out, runsIn(dir, e.Name())...)
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, SweepResults)); err == nil {
			se := sweepEntry(dir, e.Name())
			groupTime[se.Path] = se.Time
			out = append(out, se)
			out = append(out, runsIn(dir, e.Name())...)
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, SoakFile)); err == nil {
			out = append(out, soakEntry(dir, e.Name()))
			continue
		}
		if isRunDir(dir) {
			out = append(out, runEntry(dir, e.Name(), ""))
		}
	}
	group := func(e IndexEntry) time.Time {
		if e.Parent != "" {
			return groupTime[e.Parent]
		}
		return e.Time
	}
	sort.SliceStable(out, func(i, j int) bool {
		gi, gj := group(out[i]), group(out[j])
		switch {
		case !gi.Equal(gj):
			return gi.After(gj)
		case (out[i].Parent == "") != (out[j].Parent == ""):
			return out[i].Parent == "" // the comparison before its runs
		}
		return out[i].Path < out[j].Path
	})
	return out, nil
}

// runsIn lists the run directories of a comparison or sweep folder dir
// (rel in the store), each with the folder as its parent.
func runsIn(dir, rel string) []IndexEntry {
	var out []IndexEntry
	subs, _ := os.ReadDir(dir)
	for _, s := range subs {
		if s.IsDir() && isRunDir(filepath.Join(dir, s.Name())) {
			out = append(out, runEntry(filepath.Join(dir, s.Name()), rel+"/"+s.Name(), rel))
		}
	}
	return out
}

// sweepEntry is a sweep folder's row: its backends, workloads and faults,
// and its cells' outcomes.
func sweepEntry(dir, rel string) IndexEntry {
	e := IndexEntry{Kind: "sweep", Time: folderTime(dir, filepath.Base(dir)), Path: rel,
		Href: pageHref(rel, SweepReport), Verdict: "unreadable", Class: "unknown"}
	s, err := ReadSweep(dir)
	if err != nil {
		e.Summary = err.Error()
		return e
	}
	e.Backend, e.Workload, e.Faults = distinctNames(len(s.Cells), func(i int) (string, string, []string) {
		return s.Cells[i].Backend, s.Cells[i].Workload, s.Cells[i].Nemesis
	})
	e.Verdict, e.Summary, e.Class = "sweep", newSweepView(s).Totals, "notice"
	return e
}

// distinctNames lists, comma-separated and in their first order, the
// backends, workloads and fault sets of n cells, cell(i) giving each's.
func distinctNames(n int, cell func(i int) (backend, workload string, faults []string)) (backends, workloads, faults string) {
	var lists [3][]string
	for i := range n {
		b, w, f := cell(i)
		for k, name := range []string{b, w, FaultsName(f)} {
			if !slices.Contains(lists[k], name) {
				lists[k] = append(lists[k], name)
			}
		}
	}
	return strings.Join(lists[0], ", "), strings.Join(lists[1], ", "), strings.Join(lists[2], ", ")
}

func isRunDir(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, HistoryFile))
	return err == nil && fi.Mode().IsRegular()
}

// folderTime reads the time a folder's name starts with, as NewRunDir,
// NewCompareDir and NewSoakDir write it, or falls back to its modification
// time.
func folderTime(dir, name string) time.Time {
	if len(name) >= 15 {
		for _, layout := range []string{folderTimeLayout, soakTimeLayout} {
			if t, err := time.ParseInLocation(layout, name[:15], time.Local); err == nil {
				return t
			}
		}
	}
	if fi, err := os.Stat(dir); err == nil {
		return fi.ModTime()
	}
	return time.Time{}
}

func pageHref(rel, file string) string {
	return (&url.URL{Path: rel + "/" + file}).String()
}

// folderHref links a folder itself, which the store's server lists.
func folderHref(rel string) string { return pageHref(rel, "") }

// backendLabel names a backend and its variant as the index shows them.
func backendLabel(backend, variant string) string {
	if variant == "" {
		return backend
	}
	return backend + "/" + variant
}

func runEntry(dir, rel, parent string) IndexEntry {
	e := IndexEntry{Kind: "run", Time: folderTime(dir, filepath.Base(dir)), Path: rel, Parent: parent,
		Href: pageHref(rel, ReportFile), Verdict: "not checked", Class: "skipped"}
	r, err := ReadResults(dir)
	if err != nil {
		e.Summary = "no results: the run is still going, was killed before its check, or its results cannot be read (lockcheck check " + rel + " writes them)"
		e.Href = folderHref(rel)
		return e
	}
	e.Backend = backendLabel(r.Backend, r.Variant)
	e.Workload, e.Faults = r.Workload, FaultsName(r.Nemesis)
	e.Verdict, e.Class, e.Summary = r.Valid.String(), verdictClass(r.Valid), r.Reason
	if note := runNote(r.Interrupted, r.Incomplete, r.InterruptedBy); note != "" {
		e.Summary = note + " " + e.Summary
	}
	return e
}

// soakEntry is a soak directory's row: its verdict so far (soak.json is
// rewritten after each segment), linking to the first report it kept, or
// to its folder when it kept none.
func soakEntry(dir, rel string) IndexEntry {
	e := IndexEntry{Kind: "soak", Time: folderTime(dir, filepath.Base(dir)), Path: rel,
		Href: folderHref(rel), Verdict: "unreadable", Class: "unknown"}
	s, err := ReadSoak(dir)
	if err != nil {
		e.Summary = err.Error()
		return e
	}
	e.Backend = backendLabel(s.Backend, s.Variant)
	e.Workload, e.Faults = s.Workload, FaultsName(s.Nemesis)
	e.Verdict, e.Class = s.Valid.String(), verdictClass(s.Valid)
	e.Summary = fmt.Sprintf("%d segments of %s, %d with anomalies; %d grants; %d of %d faults landed.",
		len(s.Segments), time.Duration(s.SegmentMs)*time.Millisecond, s.AnomalySegments, s.Grants, s.FaultsLanded, s.FaultsInjected)
	if s.Interrupted {
		e.Summary = "Interrupted before its duration. " + e.Summary
	}
	for _, seg := range s.Segments {
		if seg.Report != "" {
			e.Href = pageHref(rel, seg.Report)
			break
		}
	}
	return e
}

func compareEntry(dir, rel string) IndexEntry {
	e := IndexEntry{Kind: "compare", Time: folderTime(dir, filepath.Base(dir)), Path: rel,
		Href: pageHref(rel, CompareReport), Backend: "", Verdict: "unreadable", Class: "unknown"}
	c, err := ReadComparison(dir)
	if err != nil {
		e.Summary = err.Error()
		return e
	}
	v := newCompareView(c)
	e.Backend, e.Workload, e.Faults = distinctNames(len(c.Cells), func(i int) (string, string, []string) {
		return c.Cells[i].Backend, c.Cells[i].Workload, c.Cells[i].Nemesis
	})
	e.Verdict, e.Summary = "comparison", v.Totals
	e.Class = "notice"
	return e
}

//go:embed index.html.tmpl
var indexTemplateText string

var indexTemplate = template.Must(template.New("index").Parse(indexTemplateText))

//go:embed index.js
var indexScriptText string

type indexView struct {
	CSP      string
	Store    string
	Entries  []IndexEntry
	Backends []string
	Script   template.JS
}

// WriteIndex writes the store's index page: every run, comparison and soak,
// colour-coded, filterable, each linking to its page.
func WriteIndex(w io.Writer, store string, entries []IndexEntry) error {
	v := indexView{CSP: contentPolicy(indexScriptText), Store: store, Entries: entries, Script: template.JS(indexScriptText)}
	seen := map[string]bool{}
	for _, e := range entries {
		if e.Kind != "compare" && e.Backend != "" && !seen[e.Backend] {
			seen[e.Backend] = true
			v.Backends = append(v.Backends, e.Backend)
		}
	}
	sort.Strings(v.Backends)
	return indexTemplate.Execute(w, v)
}

// confined is the store's file system as served: a path the root refuses
// (one that leads out of the store) is forbidden, not a server error.
type confined struct{ fs.FS }

func (c confined) Open(name string) (fs.File, error) {
	f, err := c.FS.Open(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	return f, err
}

// renderedPages are the pages lockcheck writes itself (the report, a soak
// segment's report, the compare, index and linearizability pages), served
// as HTML; its screenshots (*.png) are served as images.
var renderedPages = []string{ReportFile, LinearizabilityFile, CompareReport, IndexFile, "report-*.html"}

// servedType is the content type of the store file at p: a page lockcheck
// rendered as HTML, and every other file (a history, a client program's
// log, a node's output: text lockcheck did not write) as plain text, never
// the type the machine's MIME tables guess from its name, so that a log
// that starts with <html><script> is shown, not run. "" for a folder,
// whose listing the file server renders (escaped) itself.
func servedType(p string) string {
	if strings.HasSuffix(p, "/") {
		return ""
	}
	base := path.Base(p)
	for _, page := range renderedPages {
		if ok, _ := path.Match(page, base); ok {
			return "text/html; charset=utf-8"
		}
	}
	if path.Ext(base) == ".png" {
		return "image/png"
	}
	return "text/plain; charset=utf-8"
}

// StoreHandler serves a store: the index at /, and every file under the
// store (reports, histories, logs) as it is. Files are opened through an
// os.Root of the store, so no path, and no symlink inside the store, leads
// out of it (store/latest, which names a run beside it, still works).
func StoreHandler(store string) (http.Handler, error) {
	root, err := os.OpenRoot(store)
	if err != nil {
		return nil, fmt.Errorf("open the store: %w", err)
	}
	files := http.FileServerFS(confined{root.FS()})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "lockcheck serve only reads", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if r.URL.Path == "/favicon.ico" {
			// Browsers ask every site for one; a store has none, and a 404
			// would be an error in the console of every page.
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if r.URL.Path != "/" {
			if ct := servedType(r.URL.Path); ct != "" {
				w.Header().Set("Content-Type", ct)
			}
			files.ServeHTTP(w, r)
			return
		}
		entries, err := ScanStore(store)
		if errors.Is(err, fs.ErrNotExist) {
			http.Error(w, fmt.Sprintf("the store %s does not exist any more", store), http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := WriteIndex(w, store, entries); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}), nil
}
