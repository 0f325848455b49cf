package scenario

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/lockcheck/lockcheck/checker"
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

// Compare checks a result against the scenario's expectations.
func (f *File) Compare(res *checker.Result) Comparison {
	var c Comparison
	if f.Expect.Verdict != "" {
		got := res.Valid.String()
		c.add("verdict", f.Expect.Verdict, got, got == f.Expect.Verdict)
	}
	for _, name := range f.Expect.Fail {
		holds, desc := checkHolds(res, name)
		c.add(name, "fails", desc, !holds)
	}
	for _, name := range f.Expect.Hold {
		holds, desc := checkHolds(res, name)
		c.add(name, "holds", desc, holds)
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

// compareLanding expects every step of the timeline to have landed: a
// scenario whose fault never reached its moment reproduces nothing, whatever
// the checks say.
func (f *File) compareLanding(c *Comparison, l checker.FaultLanding) {
	if len(f.Timeline) == 0 {
		return
	}
	want := fmt.Sprintf("all %d steps", len(f.Timeline))
	got := fmt.Sprintf("%d of %d", l.Landed, l.Injected)
	if l.Missed != "" {
		got += "; " + l.Missed
	}
	c.add("faults landed", want, got, l.Landed == len(f.Timeline))
}

// checkHolds says whether a check held, and what it observed.
func checkHolds(res *checker.Result, name string) (bool, string) {
	k := res.Checks
	switch name {
	case "lease_safety":
		return k.LeaseSafety.Valid, fmt.Sprintf("%d violations", k.LeaseSafety.Violations)
	case "double_ownership":
		return k.DoubleOwnership.Windows == 0, fmt.Sprintf("%d windows", k.DoubleOwnership.Windows)
	case "resource":
		r := k.Resource
		return r.Valid, fmt.Sprintf("%d lost updates, %d stale writes accepted, %d refused", r.LostUpdates, r.StaleWritesAccepted, r.StaleWritesRefused)
	case "fencing":
		return k.Fencing.Valid, fmt.Sprintf("%d regressions, %d duplicates", k.Fencing.Regressions, k.Fencing.Duplicates)
	case "linearizability":
		return k.Linearizability.Result == "ok", k.Linearizability.Result
	case "liveness":
		if k.Liveness.StuckUntilEnd {
			return false, fmt.Sprintf("stuck until the end (%.0f ms)", k.Liveness.LongestStallMs)
		}
		return true, fmt.Sprintf("longest stall %.0f ms", k.Liveness.LongestStallMs)
	}
	return false, "unknown check"
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
