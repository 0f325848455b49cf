package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// Minimums of the nemesis's timing: a pause shorter than minPause stops a
// process for less than a scheduler tick, and faults closer than
// minNemesisInterval follow each other faster than a lock can change hands,
// so either would run a test that tests nothing.
const (
	minPause           = 10 * time.Millisecond
	minNemesisInterval = 100 * time.Millisecond
)

// flagRule is what values one numeric flag accepts: at least min (in the
// flag's unit: nanoseconds for a duration), or also 0 when zeroMeans says
// what 0 picks; check says why not, given the value.
type flagRule struct {
	min       float64
	zeroMeans string
}

// flagRules are the numeric flags whose rule is more than "not negative",
// the rule every other number flag of every command follows (backends' and
// faults' flags included). --skew may be negative: it jumps a clock back.
var flagRules = map[string]flagRule{
	"ttl":                     {min: 1},
	"time-limit":              {min: 1},
	"op-timeout":              {min: 1},
	"retry":                   {min: 1},
	"linearizability-timeout": {min: 1},
	"clients":                 {min: 1},
	"keys":                    {min: 1},
	"redlock-tries":           {min: 1},
	"skew-nodes":              {min: 1},
	"strobe-period":           {min: float64(minPause)},
	"pause":                   {min: float64(minPause), zeroMeans: "twice the TTL"},
	"nemesis-interval":        {min: float64(minNemesisInterval), zeroMeans: "the pause plus one second"},
	"skew":                    {min: -1e300},
	"seed":                    {min: -1e300},
}

// validateFlags checks every numeric flag of a command before anything
// starts, so that a negative duration cannot switch a fault off or refuse
// every acquire and still pass. The error names the flag and the fix.
func validateFlags(fl *pflag.FlagSet) error {
	var err error
	fl.VisitAll(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		v, isDuration, ok := numericValue(f)
		if !ok {
			return
		}
		rule, ok := flagRules[f.Name]
		if !ok {
			rule = flagRule{min: 0}
		}
		if v >= rule.min || (v == 0 && rule.zeroMeans != "") {
			return
		}
		err = fmt.Errorf("--%s=%s: %s", f.Name, f.Value.String(), want(rule, isDuration))
	})
	return err
}

// numericValue reads a duration, int or float flag's value.
func numericValue(f *pflag.Flag) (v float64, isDuration, ok bool) {
	switch f.Value.Type() {
	case "duration":
		d, err := time.ParseDuration(f.Value.String())
		return float64(d), true, err == nil
	case "int", "int64", "int32", "uint", "float64", "float32":
		n, err := strconv.ParseFloat(f.Value.String(), 64)
		return n, false, err == nil
	}
	return 0, false, false
}

// want says what a flag accepts, in the flag's own terms.
func want(r flagRule, isDuration bool) string {
	show := func(n float64) string {
		if isDuration {
			return time.Duration(n).String()
		}
		return strconv.FormatFloat(n, 'f', -1, 64)
	}
	var s string
	switch {
	case r.min == 0:
		s = "must not be negative"
	case r.min == 1 && isDuration:
		s = "must be a positive duration, such as 500ms or 2s"
	default:
		s = "must be at least " + show(r.min)
	}
	if r.zeroMeans != "" {
		s += " (or 0 for " + r.zeroMeans + ")"
	}
	return s
}
