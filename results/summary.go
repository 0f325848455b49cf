package results

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// summaryViolations is how many breaks of the client protocol the summary
// names; a program restarted after each can break it thousands of times.
const summaryViolations = 3

// Summary prints what a run prints when it ends: the verdict and its reason,
// one line per check with its key numbers (the why is in the report), and
// the report's path last, so a terminal or a CI log ends with where to look.
func Summary(w io.Writer, dir string, h *history.History, res *checker.Result) {
	cfg := h.Header.Config
	fmt.Fprintf(w, "%s, nemesis %s, seed %d: %d history events\n", runTitle(cfg), nemesisName(cfg), cfg.Seed, h.Length())
	if h.Truncated {
		fmt.Fprintln(w, "history cut off mid-line (the run was killed, or its disk filled up); the complete prefix was checked")
	}
	if res.Truncated.Resource {
		fmt.Fprintln(w, "resource log cut off mid-line (the run was killed); the complete prefix was checked")
	}
	fmt.Fprintf(w, "verdict: %s. %s\n", res.Valid, res.Reason)
	if note := resultNote(res); note != "" {
		fmt.Fprintln(w, note)
	}
	if line := LandingLine(res.FaultLanding); line != "" {
		fmt.Fprintln(w, line)
	}
	if line := LeaseLine(h); line != "" {
		fmt.Fprintln(w, line)
	}
	for _, st := range checkStatuses(cfg, res, spanOf(h, res).Start) {
		fmt.Fprintf(w, "%-17s %s (%s)\n", st.Title, word(st.Outcome), st.Numbers)
	}
	for _, l := range libraryLosses(h) {
		fmt.Fprintln(w, "lock lost: "+l.Line())
	}
	for _, line := range checker.ClientViolationLines(res, spanOf(h, res).Start, summaryViolations) {
		fmt.Fprintln(w, "client broke the protocol: "+line)
	}
	if cmd := reproCommand(dir, res); cmd != "" {
		fmt.Fprintf(w, "repro: %s\n", cmd)
		fmt.Fprintf(w, "       replay rate: %s\n", ReplayRate(cfg))
	}
	fmt.Fprintf(w, "report: %s\n", filepath.Join(dir, ReportFile))
}

// LandingLine says how many of a run's faults landed, and the first miss,
// or "" for a run with no nemesis (or a history that does not record
// landings).
func LandingLine(l checker.FaultLanding) string {
	if !l.Judged() {
		return ""
	}
	line := fmt.Sprintf("faults landed: %d of %d injected", l.Landed, l.Injected)
	if l.Missed != "" {
		line += "; first miss: " + l.Missed
	}
	return line
}
