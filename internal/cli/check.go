package cli

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/results"
	"github.com/lockcheck/lockcheck/scenario/repro"
)

func newCheckCmd() *cobra.Command {
	var linTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "check RUN_DIR | SEGMENT.jsonl.zst",
		Short: "Check a stored history again and rewrite its results and report",
		Long: `check reads RUN_DIR/history.jsonl (and RUN_DIR/resource.jsonl when present),
checks it, and rewrites results.json, junit.xml and report.html in RUN_DIR.
It gives the same verdict and counts as the run that wrote the history.
A history written by hand (for example from an incident report) can be
checked the same way.

A segment of a soak (history-0001.jsonl.zst, with resource-0001.jsonl.zst
beside it when there is one) is checked on its own: it is decompressed into
history-0001.checked/ beside it, where the results and report are written.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := openCheckTarget(args[0])
			if err != nil {
				return err
			}
			v, err := checkDir(dir, results.CheckDir, checker.Options{LinearizabilityTimeout: linTimeout}, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			return verdictExit(v)
		},
	}
	cmd.Flags().DurationVar(&linTimeout, "linearizability-timeout", 10*time.Second, "time limit of the linearizability check; when it runs out the result is unknown, never a pass")
	return cmd
}

// segmentSuffix ends the file name of a soak's segment history.
const segmentSuffix = ".jsonl.zst"

// openCheckTarget is the run directory check checks: path itself, or for a
// soak's segment the directory beside it that holds it decompressed.
func openCheckTarget(path string) (string, error) {
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && strings.HasSuffix(path, segmentSuffix) {
		return results.OpenSegment(path)
	}
	return results.OpenRunDir(path)
}

// dirCheck checks a run directory and writes its results files:
// results.CheckDir, or results.CheckDirStreamed for a soak's segments.
type dirCheck func(dir string, opts checker.Options, before ...results.BeforeWrite) (*history.History, *checker.Result, error)

// checkDir checks the history of a run directory, leaves the reproduction
// of a false verdict beside it, writes the results files (once, linking
// the reproduction) and prints the summary.
func checkDir(dir string, check dirCheck, opts checker.Options, w io.Writer) (checker.Validity, error) {
	h, res, err := check(dir, opts, func(h *history.History, res *checker.Result) {
		if err := writeRepro(dir, h, res); err != nil {
			// The verdict stands on its own: a repro that could not be
			// written says why.
			slog.Warn("no repro.yaml for this run", "err", err)
		}
	})
	if err != nil {
		return checker.Unknown, err
	}
	results.Summary(w, dir, h, res)
	return res.Valid, nil
}

// writeRepro leaves the scenario that reproduces a run that ended false in
// its directory, for the report to link and the summary to print the
// command that reruns it. A history of a backend this lockcheck does not
// have (one another program recorded, or written by hand of such a lock)
// gets none: no scenario can rerun it, and that is no one's fault.
func writeRepro(dir string, h *history.History, res *checker.Result) error {
	if c := h.Header.Config.Client; c != nil {
		// A run of a lock client program: its scenario reruns the
		// program, on a topology this lockcheck must have.
		if _, err := catalog.ClientTarget(c.Name, catalog.ClientProgram{Command: c.Command, Topology: c.Topology}); err != nil {
			return nil
		}
	} else if _, _, err := catalog.Lookup(h.Header.Config.Backend, h.Header.Config.Variant); err != nil {
		return nil
	}
	_, err := repro.Write(dir, h, res)
	return err
}

// worseVerdict is the worse of two verdicts of a matrix of soaks: false
// over unknown over true.
func worseVerdict(a, b checker.Validity) checker.Validity {
	switch {
	case a == checker.Invalid || b == checker.Invalid:
		return checker.Invalid
	case a == checker.Unknown || b == checker.Unknown:
		return checker.Unknown
	}
	return checker.Valid
}

func verdictExit(v checker.Validity) error {
	switch v {
	case checker.Valid:
		return nil
	case checker.Invalid:
		return exitError{exitInvalid}
	}
	return exitError{exitUnknown}
}

// isTerminal reports whether progress can be drawn in place on f.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
