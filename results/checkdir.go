package results

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// CheckDir checks the history of a run directory (with its resource log
// when there is one) and writes results.json, junit.xml and report.html,
// and porcupine's visualization of a linearizability failure.
func CheckDir(dir string, opts checker.Options) (*history.History, *checker.Result, error) {
	h, err := history.ReadFile(filepath.Join(dir, HistoryFile))
	if err != nil {
		return nil, nil, namedError(filepath.Join(dir, HistoryFile), err)
	}
	var resLog []history.ResourceEntry
	rl, err := history.ReadResource(filepath.Join(dir, ResourceFile))
	switch {
	case err == nil:
		resLog = rl.Entries
	case !errors.Is(err, fs.ErrNotExist):
		return nil, nil, namedError(filepath.Join(dir, ResourceFile), err)
	}
	res := checker.Check(h, resLog, opts)
	res.Truncated.Resource = rl != nil && rl.Truncated
	if err := WriteLinearizability(dir, h, resLog, res, opts); err != nil {
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
