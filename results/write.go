package results

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// writeJSON writes v into dir/name, indented, atomically (writeFileAtomic).
func writeJSON(dir, name string, v any) error {
	return writeFileAtomic(dir, name, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	})
}

// readJSON reads dir/name into v; a file that is not JSON is an error
// naming it.
func readJSON(dir, name string, v any) error {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// WriteAll writes results.json, junit.xml and report.html into dir. Each file
// is written under a temporary name and renamed into place, so a reader (a CI
// job, a browser, lockcheck serve) never sees half a file, and a re-check that
// fails leaves the previous files intact. The report links porcupine's
// visualization when WriteLinearizability left one in dir.
func WriteAll(dir string, h *history.History, res *checker.Result) error {
	err := writeFileAtomic(dir, ResultsFile, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(newResults(h, res))
	})
	if err != nil {
		return err
	}
	err = writeFileAtomic(dir, JUnitFile, func(w io.Writer) error {
		return writeJUnit(w, h, res)
	})
	if err != nil {
		return err
	}
	linVis := ""
	if res.Checks.Linearizability.Result == checker.NotLinearizable {
		if _, err := os.Stat(filepath.Join(dir, LinearizabilityFile)); err == nil {
			linVis = LinearizabilityFile
		}
	}
	return writeFileAtomic(dir, ReportFile, func(w io.Writer) error {
		return writeReport(w, h, res, linVis, reproCommand(dir, res))
	})
}

// reproCommand is the command that reruns the reproduction of a run that
// ended false, when its directory holds one, or "".
func reproCommand(dir string, res *checker.Result) string {
	if res.Valid != checker.Invalid {
		return ""
	}
	path := filepath.Join(dir, ReproFile)
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return ReproCommand(path)
}

// ReproCommand is the command line that reruns the reproduction at path.
func ReproCommand(path string) string {
	return shellJoin([]string{"lockcheck", "scenario", "run", "--file", path})
}

// WriteLinearizability writes porcupine's own visualization of the window
// around a linearizability failure into dir, for the report to link, and
// removes one an earlier check left when there is no failure any more. It
// searches the failing segment (the one the check kept) again, so it is
// called only for an illegal result: an unknown one ran out of time
// already.
func WriteLinearizability(dir string, res *checker.Result, opts checker.Options) error {
	path := filepath.Join(dir, LinearizabilityFile)
	if res.Checks.Linearizability.Result != checker.NotLinearizable {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	err := writeFileAtomic(dir, LinearizabilityFile, func(w io.Writer) error {
		return res.Checks.Linearizability.Visualize(opts, w)
	})
	if errors.Is(err, checker.ErrNothingToVisualize) {
		return nil // the segment is too large to draw; the report says what it can
	}
	return err
}

func writeFileAtomic(dir, name string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("write %s: %w", name, err)
		}
	}()
	bw := bufio.NewWriterSize(f, 64<<10)
	if err = write(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	// CreateTemp makes the file private; these files are meant to be shared.
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, name))
}
