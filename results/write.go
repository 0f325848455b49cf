package results

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// WriteAll writes results.json, junit.xml and report.html into dir. Each file
// is written under a temporary name and renamed into place, so a reader (a CI
// job, a browser, lockcheck serve) never sees half a file, and a re-check that
// fails leaves the previous files intact.
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
	return writeFileAtomic(dir, ReportFile, func(w io.Writer) error {
		return writeReport(w, h, res)
	})
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
