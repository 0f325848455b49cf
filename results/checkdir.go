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
		return nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, HistoryFile), err)
	}
	resLog, err := history.ReadResourceLog(filepath.Join(dir, ResourceFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, ResourceFile), err)
	}
	res := checker.Check(h, resLog, opts)
	if err := WriteLinearizability(dir, h, resLog, res, opts); err != nil {
		return nil, nil, err
	}
	if err := WriteAll(dir, h, res); err != nil {
		return nil, nil, err
	}
	return h, res, nil
}
