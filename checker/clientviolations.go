package checker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockcheck/lockcheck/history"
)

// ClientViolation is a rule of the client protocol a lock client program
// broke (a client-violation event, docs/clients.md): lockcheck ended the
// program, so the run did not test its library as it runs, and the verdict
// is unknown unless a safety check failed. This is the one place that
// decides so (runUnknownReasons reads clientViolationReason).
type ClientViolation struct {
	// Client is the client's process (c3) when the program broke it.
	Client string `json:"client"`
	Rule   string `json:"rule"`
	// Detail is what the program did, with its line (cut).
	Detail string `json:"detail"`
	// At is when lockcheck read it (CLOCK_MONOTONIC ns), Index its event.
	At    int64 `json:"at"`
	Index int64 `json:"index"`
}

// clientViolations are the client-violation events among the nemesis's.
// It keeps the first maxEvidence; n counts them all.
func clientViolations(nemesis []*history.Event) (out []ClientViolation, n int) {
	for _, e := range nemesis {
		if e.F != history.NemClientViolation || e.Value == nil {
			continue
		}
		if n++; len(out) == maxEvidence {
			continue
		}
		rule := e.Value.Rule
		if rule == "" {
			rule = "unnamed" // a hand-written event without its rule is still a break
		}
		out = append(out, ClientViolation{Client: e.Value.Target, Rule: rule, Detail: e.Value.Detail, At: e.Time, Index: e.Index})
	}
	return out, n
}

// clientViolationReason says, in one sentence, that a client broke the
// protocol n times: the first break, when and how, and the other rules
// broken (among vs, the first of them); "" when none was. t0 is the
// history's start.
func clientViolationReason(vs []ClientViolation, n int, t0 int64) string {
	if len(vs) == 0 {
		return ""
	}
	first := vs[0]
	s := fmt.Sprintf("A lock client program broke the client protocol %s, first %s at %s (rule: %s): %s",
		count(n, "time", "times"), first.Client, relSeconds(first.At-t0), first.Rule, strings.TrimSuffix(first.Detail, "."))
	var others []string
	for _, v := range vs[1:] {
		if v.Rule != first.Rule && !slices.Contains(others, v.Rule) {
			others = append(others, v.Rule)
		}
	}
	if len(others) > 0 {
		s += "; also broken: " + strings.Join(others, "; ")
	}
	return s + "; lockcheck ended the program each time, so its library was not tested as it runs (docs/clients.md)."
}

// ClientViolationLines are the first most of r's breaks of the client
// protocol, a line each (Line), and a last line counting the rest: what
// the summary (a few) and the report (MaxEvidenceLines) show; results.json
// lists them.
func ClientViolationLines(r *Result, t0 int64, most int) []string {
	var lines []string
	for _, v := range r.ClientViolations[:min(most, len(r.ClientViolations))] {
		lines = append(lines, v.Line(t0))
	}
	if rest := r.ClientViolationCount - len(lines); rest > 0 {
		lines = append(lines, fmt.Sprintf("%d more (results.json client_violations)", rest))
	}
	return lines
}

// Line is the break in one line, as the summary and the report show it:
// who, when (seconds from t0), what, and the rule.
func (v ClientViolation) Line(t0 int64) string {
	return fmt.Sprintf("%s at %s: %s (rule: %s)", v.Client, relSeconds(v.At-t0), v.Detail, v.Rule)
}
