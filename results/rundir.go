// Package results lays out lockcheck's run directories and writes everything
// a person or a CI job reads about a run: results.json, junit.xml,
// report.html and the terminal summary.
package results

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Files and folders of a run directory.
const (
	HistoryFile  = "history.jsonl"
	ResourceFile = "resource.jsonl"
	ResultsFile  = "results.json"
	ReportFile   = "report.html"
	JUnitFile    = "junit.xml"
	// LinearizabilityFile is porcupine's visualization of a linearizability
	// failure, beside the report that links it.
	LinearizabilityFile = "linearizability.html"
	// ReproFile is the scenario that reproduces a run that ended false
	// (package scenario/repro writes it), beside the report that links it.
	ReproFile = "repro.yaml"
	LogsDir   = "logs"
	// LatestLink is the symlink in the output folder that names the newest run.
	LatestLink = "latest"
)

// folderTimeLayout is the time a run's, comparison's or merge's folder name
// starts with; soakTimeLayout a soak's.
const (
	folderTimeLayout = "20060102-150405"
	soakTimeLayout   = "20060102T150405"
)

// NewRunDir creates <out>/<YYYYMMDD-HHMMSS>-<backend>-<workload>/ and its
// logs/ folder, and points <out>/latest at it. When two runs start in the same
// second the later one gets a -2, -3, ... suffix instead of sharing a folder.
func NewRunDir(out, backend, workload string, now time.Time) (string, error) {
	dir, err := newNumberedDir(out, now.Format(folderTimeLayout)+"-"+pathSafe(backend)+"-"+pathSafe(workload), "run")
	if err != nil {
		return "", err
	}
	if err := os.Mkdir(filepath.Join(dir, LogsDir), 0o755); err != nil {
		return "", fmt.Errorf("create run folder: %w", err)
	}
	if err := pointLatest(out, filepath.Base(dir)); err != nil {
		return "", err
	}
	return dir, nil
}

// pointLatest replaces <out>/latest with a symlink to name. The target is
// relative so the output folder can be moved or copied as a whole, and the
// link is swapped by renaming a fresh one over it, so a reader never finds
// latest missing. The fresh link is named after the run, which is unique, so
// concurrent runs cannot trip over each other's.
func pointLatest(out, name string) error {
	latest := filepath.Join(out, LatestLink)
	tmp := filepath.Join(out, "."+LatestLink+"-"+name+".tmp")
	if err := os.Symlink(name, tmp); err != nil {
		return fmt.Errorf("link %s: %w", latest, err)
	}
	if err := os.Rename(tmp, latest); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("link %s (is it a folder rather than a symlink?): %w", latest, err)
	}
	return nil
}

// pathSafe keeps a backend or workload name from adding path separators or
// other surprises to a folder name.
func pathSafe(s string) string {
	if s == "" {
		return "none"
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
}

// OpenRunDir resolves path (following symlinks such as store/latest) and
// checks that it is a run directory, that is, that it holds a history.
func OpenRunDir(path string) (string, error) {
	notRunDir := func(why string) error {
		return fmt.Errorf("%s is not a lockcheck run directory (%s); pass a directory written by lockcheck run, such as store/latest", path, why)
	}
	dir, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", notRunDir("it does not exist")
	}
	if err != nil {
		return "", fmt.Errorf("open run directory: %w", err)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("open run directory: %w", err)
	}
	if !info.IsDir() {
		return "", notRunDir("it is a file, not a directory")
	}
	hist, err := os.Stat(filepath.Join(dir, HistoryFile))
	if err != nil || !hist.Mode().IsRegular() {
		return "", notRunDir("no " + HistoryFile)
	}
	return dir, nil
}
