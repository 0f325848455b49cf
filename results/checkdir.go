package results

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// BeforeWrite is what a caller of CheckDir leaves in the run directory
// between the check and the writing of its results files, for the report
// to show (the reproduction of a false verdict, repro.yaml), so that each
// file is written once.
type BeforeWrite func(h *history.History, res *checker.Result)

// CheckDir checks the history of a run directory (with its resource log
// when there is one), runs before, and writes results.json, junit.xml and
// report.html, and porcupine's visualization of a linearizability failure.
//
// A history too long to hold in memory (over excerptBytes) is checked as
// CheckDirStreamed checks it.
func CheckDir(dir string, opts checker.Options, before ...BeforeWrite) (*history.History, *checker.Result, error) {
	historyPath, resourcePath := filepath.Join(dir, HistoryFile), filepath.Join(dir, ResourceFile)
	if fi, err := os.Stat(historyPath); err == nil && fi.Size() > excerptBytes {
		return CheckDirStreamed(dir, opts, before...)
	}
	h, err := history.ReadFile(historyPath)
	if err != nil {
		return nil, nil, namedError(historyPath, err)
	}
	rl, err := history.ReadResource(resourcePath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, namedError(resourcePath, err)
	}
	res := checker.CheckLog(h, rl, opts)
	res.Truncated.Resource = rl != nil && rl.Truncated
	for _, b := range before {
		b(h, res)
	}
	if err := WriteLinearizability(dir, res, opts); err != nil {
		return nil, nil, err
	}
	if err := WriteAll(dir, h, res); err != nil {
		return nil, nil, err
	}
	return h, res, nil
}

// namedError names the file of a read error, unless it already does (a
// ParseError names the file, line and rule).
func namedError(path string, err error) error {
	if pe := (*history.ParseError)(nil); errors.As(err, &pe) {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// CheckDirStreamed is CheckDir (before included) for a history of any length: it is checked
// as it is read, with its resource log, and the History returned, which the
// report is drawn from, is an excerpt of it (history.Excerpt), so that
// memory follows the clients and keys, never the history's length. A soak
// checks every segment so, whatever its length.
func CheckDirStreamed(dir string, opts checker.Options, before ...BeforeWrite) (*history.History, *checker.Result, error) {
	historyPath, resourcePath := filepath.Join(dir, HistoryFile), filepath.Join(dir, ResourceFile)
	// The heap of this check stays small whatever the history's length,
	// and it allocates per event: collecting at four times the live heap
	// instead of twice saves a fifth of the time.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	x := newExcerptReader()
	res, err := checker.CheckFilesAt(historyPath, resourcePath, opts, x.header, x.event)
	if err != nil {
		return nil, nil, namedError(historyPath, err)
	}
	h, err := x.read(historyPath, res)
	if err != nil {
		return nil, nil, namedError(historyPath, err)
	}
	for _, b := range before {
		b(h, res)
	}
	// No porcupine visualization: it needs the whole history.
	if err := WriteLinearizability(dir, &checker.Result{}, opts); err != nil {
		return nil, nil, err
	}
	if err := WriteAll(dir, h, res); err != nil {
		return nil, nil, err
	}
	return h, res, nil
}
