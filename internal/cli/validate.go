package cli

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
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
// flag's unit: nanoseconds for a duration), at most max() when max is set,
// or also 0 when zeroMeans says what 0 picks; why says, for the user, what
// the bound stands for.
type flagRule struct {
	min       float64
	zeroMeans string
	why       string
	max       func() (n float64, why string)
}

// flagRules are the numeric flags whose rule is more than "not negative",
// the rule every other number flag of every command follows (backends' and
// faults' flags included). --skew may be negative: it jumps a clock back.
var flagRules = map[string]flagRule{
	"ttl":                     {min: float64(time.Millisecond), why: "a lock service grants leases in whole milliseconds, so a shorter TTL asks for a lease of none"},
	"time-limit":              {min: 1},
	"op-timeout":              {min: 1},
	"retry":                   {min: 1},
	"linearizability-timeout": {min: 1},
	"clients":                 {min: 1, max: maxClients},
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
		if rule.max != nil {
			if most, why := rule.max(); v > most {
				err = fmt.Errorf("--%s=%s: must be at most %s: %s", f.Name, f.Value.String(), strconv.FormatFloat(most, 'f', -1, 64), why)
				return
			}
		}
		if v >= rule.min || (v == 0 && rule.zeroMeans != "") {
			return
		}
		err = fmt.Errorf("--%s=%s: %s", f.Name, f.Value.String(), want(rule, isDuration))
	})
	if err != nil {
		return err
	}
	return timeLimitHoldsALease(fl)
}

// timeLimitHoldsALease refuses a time limit shorter than the TTL: a run
// that ends before one lease could run out cannot see a lease end, or a
// holder outlive one, and its pass would vouch for nothing.
func timeLimitHoldsALease(fl *pflag.FlagSet) error {
	limit, ttl := fl.Lookup("time-limit"), fl.Lookup("ttl")
	if limit == nil || ttl == nil {
		return nil
	}
	l, _, lok := numericValue(limit)
	t, _, tok := numericValue(ttl)
	if !lok || !tok || l >= t {
		return nil
	}
	return fmt.Errorf("--time-limit=%s: must be at least the TTL (--ttl %s): a run shorter than one lease cannot see a lease run out, so it would test nothing", limit.Value.String(), ttl.Value.String())
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
	if r.why != "" {
		s += ": " + r.why
	}
	return s
}

// memoryPerClient is what one client slot takes at most on this machine:
// its worker (lockcheck itself, about 20 MB resident) and the lock client
// program it may start (an interpreter with its library), with room to
// spare. docs/running.md states the bound --clients follows from it.
const memoryPerClient = 64 << 20

// maxClients is the most clients this machine can run: every client slot
// is a worker process (and maybe a lock client program of its own), so
// the bound is the memory the machine has over memoryPerClient, and no
// more than half the processes the user may start.
func maxClients() (float64, string) {
	mem := memTotal()
	n := mem / memoryPerClient
	why := fmt.Sprintf("every client is a process of its own (a worker, and its lock client program), and %d MiB of memory holds %d at %d MiB each", mem>>20, n, memoryPerClient>>20)
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &lim); err == nil && lim.Cur != unix.RLIM_INFINITY && int64(lim.Cur/2) < n {
		n = int64(lim.Cur / 2)
		why = fmt.Sprintf("every client is a process of its own (a worker, and its lock client program), and the user may start %d processes (ulimit -u)", lim.Cur)
	}
	return float64(max(n, 1)), why
}

// memTotal is the machine's memory in bytes (MemTotal of /proc/meminfo),
// or 4 GiB where it cannot be read.
func memTotal() int64 {
	const fallback = 4 << 30
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return fallback
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil && kb > 0 {
				return kb << 10
			}
		}
	}
	return fallback
}
