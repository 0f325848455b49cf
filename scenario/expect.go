package scenario

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/workloads"
)

// Mismatch is one expectation the observed result did not meet.
type Mismatch struct {
	What     string
	Expected string
	Observed string
}

// Comparison lists each expectation with what was observed.
type Comparison struct {
	Lines      []Mismatch // every expectation, met or not
	Mismatches []Mismatch
}

// OK reports whether every expectation was met.
func (c Comparison) OK() bool { return len(c.Mismatches) == 0 }

func (c *Comparison) add(what, expected, observed string, ok bool) {
	m := Mismatch{What: what, Expected: expected, Observed: observed}
	c.Lines = append(c.Lines, m)
	if !ok {
		c.Mismatches = append(c.Mismatches, m)
	}
}

// VerdictNotTrue is the verdict a scenario expects of a run that must
// never pass: false or unknown.
const VerdictNotTrue = "not true"

// Compare checks a result against the scenario's expectations.
func (f *File) Compare(res *checker.Result) Comparison {
	var c Comparison
	if f.Expect.Verdict != "" {
		got := res.Valid.String()
		met := got == f.Expect.Verdict || f.Expect.Verdict == VerdictNotTrue && res.Valid != checker.Valid
		c.add("verdict", f.Expect.Verdict, got, met)
	}
	// A check fails when its status is failed and holds when it is ok; a
	// notice, unknown or skipped check does neither.
	for _, name := range f.Expect.Fail {
		j, _ := f.judge(res, name)
		c.add(name, "fails", observed(j), j.Status == checker.StatusFailed)
	}
	for _, name := range f.Expect.Hold {
		j, _ := f.judge(res, name)
		c.add(name, "holds", observed(j), j.Status == checker.StatusOK)
	}
	values := flatten(res.Checks)
	for path, cond := range f.Expect.Counts {
		op, want, _ := parseCondition(cond)
		got, ok := values[path]
		if !ok {
			c.add(path, cond, "no such number in results.json", false)
			continue
		}
		c.add(path, cond, strconv.FormatFloat(got, 'f', -1, 64), compare(got, op, want))
	}
	f.compareLanding(&c, res.FaultLanding)
	return c
}

// compareLanding expects every step of the timeline to have landed, or as
// many as Expect.Landed says: a scenario whose fault never reached its
// moment reproduces nothing, whatever the checks say.
func (f *File) compareLanding(c *Comparison, l checker.FaultLanding) {
	if len(f.Timeline) == 0 {
		return
	}
	want, ok := fmt.Sprintf("all %d steps", len(f.Timeline)), l.Landed == len(f.Timeline)
	if f.Expect.Landed != "" {
		op, n, _ := parseCondition(f.Expect.Landed)
		want, ok = fmt.Sprintf("%s of %d steps", f.Expect.Landed, len(f.Timeline)), compare(float64(l.Landed), op, n)
	}
	got := fmt.Sprintf("%d of %d", l.Landed, l.Injected)
	if l.Missed != "" {
		got += "; " + l.Missed
	}
	c.add("faults landed", want, got, ok)
}

// stepsNotRun adds a mismatch for each timeline step that never ran (the
// run ended before its time, or before its client reached its moment): a
// timeline that did not happen as written reproduces nothing, whatever
// the checks say. A scenario that asks only some steps to land counts
// them in compareLanding instead.
func (f *File) stepsNotRun(c *Comparison, steps []int) {
	if f.Expect.Landed != "" {
		return
	}
	for _, i := range steps {
		if i < 0 || i >= len(f.Timeline) {
			continue
		}
		s := f.Timeline[i]
		what := fmt.Sprintf("timeline step %d (%s %s%s", i+1, s.Do, s.Target, s.Fault)
		if line, ok := f.lines[fmt.Sprintf("timeline[%d]", i)]; ok {
			what += fmt.Sprintf(", line %d", line)
		}
		c.add(what+")", "runs", "never ran: the run ended first", false)
	}
}

// judge is how the check named name came out in res, as the check itself
// decides (checker's Judge): the verdict, junit.xml and the report read
// the same decision.
func (f *File) judge(res *checker.Result, name string) (checker.Judgement, bool) {
	for _, c := range res.Checks.List() {
		if c.Key == name {
			return c.Check.Judge(checker.JudgeContext{Fenced: f.Workload == workloads.Fenced, T0: res.Span.Start}), true
		}
	}
	return checker.Judgement{}, false
}

// observed is a check's judgement as the comparison prints it.
func observed(j checker.Judgement) string {
	if j.Message == "" {
		return string(j.Status)
	}
	return string(j.Status) + ": " + j.Message
}

// flatten maps "check.field" to every number in the checks' JSON.
func flatten(checks checker.Checks) map[string]float64 {
	raw, _ := json.Marshal(checks)
	var m map[string]map[string]any
	json.Unmarshal(raw, &m) //nolint:errcheck // we just marshalled it
	out := map[string]float64{}
	for check, fields := range m {
		for field, v := range fields {
			switch x := v.(type) {
			case float64:
				out[check+"."+field] = x
			case bool:
				if x {
					out[check+"."+field] = 1
				} else {
					out[check+"."+field] = 0
				}
			}
		}
	}
	return out
}

// countPathError says why path names no number of results.json's checks,
// listing the numbers of its check, or the checks, to choose from.
func countPathError(path string) error {
	known := flatten(checker.Checks{})
	if _, ok := known[path]; ok {
		return nil
	}
	check, _, _ := strings.Cut(path, ".")
	var choices []string
	for p := range known {
		if strings.HasPrefix(p, check+".") {
			choices = append(choices, p)
		}
	}
	if len(choices) == 0 {
		return fmt.Errorf("%q names no check of results.json (choose one of: %s)", path, strings.Join(Checks, ", "))
	}
	slices.Sort(choices)
	return fmt.Errorf("%q is no number of results.json (choose one of: %s)", path, strings.Join(choices, ", "))
}

// parseCondition reads ">= 1", "0", "< 3".
func parseCondition(s string) (op string, n float64, err error) {
	s = strings.TrimSpace(s)
	for _, o := range []string{">=", "<=", "==", ">", "<"} {
		if strings.HasPrefix(s, o) {
			op, s = o, strings.TrimSpace(s[len(o):])
			break
		}
	}
	if op == "" {
		op = "=="
	}
	n, err = strconv.ParseFloat(s, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not a condition such as \">= 1\" or \"0\"", s)
	}
	return op, n, nil
}

func compare(got float64, op string, want float64) bool {
	switch op {
	case ">=":
		return got >= want
	case "<=":
		return got <= want
	case ">":
		return got > want
	case "<":
		return got < want
	}
	return got == want
}
