package results

import (
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// word is a check's status as the summary and the report print it.
func word(s checker.Status) string {
	switch s {
	case checker.StatusFailed:
		return "FAILED"
	case checker.StatusUnknown:
		return "UNKNOWN"
	}
	return string(s)
}

// class is a check's status as a CSS class of the report.
func class(s checker.Status) string {
	switch s {
	case checker.StatusOK:
		return "pass"
	case checker.StatusFailed:
		return "fail"
	}
	return string(s)
}

// checkStatus is one check's outcome in words: the status and message the
// check decided itself (checker's Judge), with its numbers and evidence.
// junit.xml, the summary and the report all derive from checkStatuses.
type checkStatus struct {
	Key     string // the check's key in results.json
	Title   string // the check as people read it
	Outcome checker.Status
	Numbers string // its key numbers, for the summary and junit system-out
	Message string // one sentence, set when the outcome is not ok
	Details []string
}

// checkStatuses describes every check of res, in results.json's order. t0
// is the start of the history's span; evidence times are printed relative
// to it.
func checkStatuses(cfg history.RunConfig, res *checker.Result, t0 int64) []checkStatus {
	var out []checkStatus
	for _, c := range res.Checks.List() {
		j := c.Check.Judge(checker.JudgeContext{Fenced: cfg.Guarded(), T0: t0})
		st := checkStatus{Key: c.Key, Title: c.Title, Outcome: j.Status, Message: j.Message}
		st.Numbers, st.Details = c.Check.EvidenceLines(j.Status, t0)
		out = append(out, st)
	}
	return out
}

// spanOf is the time the report and evidence are measured against: the
// checker's span, or the events' own bounds when the result carries none.
func spanOf(h *history.History, res *checker.Result) checker.Interval {
	if res.Span.End > res.Span.Start {
		return res.Span
	}
	span := checker.Interval{Start: h.Header.StartTime, End: h.Header.StartTime}
	for i, e := range h.Events {
		if i == 0 || e.Time < span.Start {
			span.Start = e.Time
		}
		if e.Time > span.End {
			span.End = e.Time
		}
	}
	if span.End <= span.Start {
		span.End = span.Start + 1 // a single instant still needs a width to draw
	}
	return span
}

// relSec, fmtMs, fmtFence and orNone are the checker's, under the short
// names the pages use throughout.
func relSec(ns, t0 int64) string { return checker.RelSec(ns, t0) }
func fmtMs(ms float64) string    { return checker.FmtMs(ms) }
func fmtFence(f *int64) string   { return checker.FmtFence(f) }
func orNone(list []string) string {
	return checker.OrNone(list)
}

// plural is checker.Plural, under the short name the pages use throughout.
func plural(n int, noun string) string { return checker.Plural(n, noun) }
