// Package repro turns a run that ended false into a scenario that
// reproduces it (repro.yaml): the run's backend, workload and clients, the
// faults that were in force around each anomaly, each aimed the way the
// run aimed it, and the checks that failed as the scenario's expectation.
package repro

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/results"
	"github.com/lockcheck/lockcheck/scenario"
)

// File is the name of the reproduction a failing run leaves in its
// directory.
const File = results.ReproFile

// Write writes repro.yaml into dir when the run ended false and returns
// its path; otherwise it removes one an earlier check left (the history
// was changed and no longer fails) and returns "". A scenario's run keeps
// the reproduction its scenario run wrote (WriteScenario): the scenario
// as run says its timeline exactly, which its history can only retell.
func Write(dir string, h *history.History, res *checker.Result) (string, error) {
	path := filepath.Join(dir, File)
	if res.Valid != checker.Invalid {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", nil
	}
	if h.Header.Config.Scenario != nil {
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
	}
	return write(path, FromRun(filepath.Base(dir), h, res))
}

// WriteScenario writes repro.yaml into dir for a run of scenario f that
// ended false (FromScenario) and returns its path, or "" when the run did
// not end false.
func WriteScenario(dir string, f *scenario.File, h *history.History, res *checker.Result) (string, error) {
	if res.Valid != checker.Invalid {
		return "", nil
	}
	return write(filepath.Join(dir, File), FromScenario(f, h, res))
}

// write writes the reproduction f to path, atomically.
func write(path string, f *scenario.File) (string, error) {
	data, err := f.Marshal()
	if err != nil {
		return "", err
	}
	// The file must read back as the scenario it claims to be.
	if _, err := scenario.Parse(path, data); err != nil {
		return "", fmt.Errorf("write %s: %w", File, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", File, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write %s: %w", File, err)
	}
	return path, nil
}

// FromScenario is the reproduction of a run of scenario f that ended
// false: f as run, expecting the checks that failed (and nothing about
// counts), so that shrink can start from the run's directory.
func FromScenario(f *scenario.File, h *history.History, res *checker.Result) *scenario.File {
	c := *f
	if !strings.HasPrefix(c.Name, "repro-") {
		c.Name = "repro-" + c.Name
	}
	c.Expect = scenario.Expect{Verdict: "false", Fail: FailedChecks(h.Header.Config.Fenced(), &res.Checks), Landed: f.Expect.Landed}
	return &c
}

// FromRun builds the scenario of a failing run: name names it (the run
// directory's name).
func FromRun(name string, h *history.History, res *checker.Result) *scenario.File {
	cfg := h.Header.Config
	f := &scenario.File{
		Name:        "repro-" + name,
		Title:       fmt.Sprintf("Reproduction of run %s (%s)", name, strings.Join(FailedChecks(cfg.Fenced(), &res.Checks), ", ")),
		Source:      results.RerunCommand(cfg),
		Backend:     cfg.Backend,
		Variant:     cfg.Variant,
		Workload:    cfg.Workload,
		FenceSource: cfg.FenceSource,
		Resource:    cfg.Resource,
		TTL:         scenario.Duration(time.Duration(cfg.TTLms) * time.Millisecond),
		Clients:     cfg.Clients,
		Think:       cfg.Think,
		TimeLimit:   scenario.Duration(time.Duration(cfg.TimeLimitMs) * time.Millisecond),
		Params:      cfg.Params,
		// Its faults are replayed where they met their moments; on
		// another run, under other load, some may miss theirs.
		Expect: scenario.Expect{Verdict: "false", Fail: FailedChecks(cfg.Fenced(), &res.Checks), Landed: ">= 1"},
	}
	f.Timeline = timeline(h, res, steps(h, res))
	return f
}

// FailedChecks names the checks whose status is failed, as each decides
// it; fenced says whether the resource checked fences.
func FailedChecks(fenced bool, checks *checker.Checks) []string {
	var out []string
	for _, c := range checks.List() {
		if c.Check.Judge(checker.JudgeContext{Fenced: fenced}).Status == checker.StatusFailed {
			out = append(out, c.Key)
		}
	}
	return out
}

// anomalies are the spans of everything a failing check found.
func anomalies(res *checker.Result, ttl int64) []checker.Interval {
	var out []checker.Interval
	for _, v := range res.Checks.LeaseSafety.Evidence {
		out = append(out, checker.Interval{Start: v.Earlier.Invoke, End: v.Later.OK})
	}
	for _, w := range res.Checks.DoubleOwnership.List {
		out = append(out, checker.Interval{Start: w.Start, End: w.End})
	}
	for _, a := range res.Checks.Resource.Anomalies {
		// A lost update is a write computed from a value read up to a
		// lease earlier.
		out = append(out, checker.Interval{Start: a.Time - ttl, End: a.Time})
	}
	for _, a := range res.Checks.Fencing.Anomalies {
		out = append(out, checker.Interval{Start: a.Earlier.Invoke, End: a.Later.OK})
	}
	if w := res.Checks.Linearizability.Window; w != nil && res.Checks.Linearizability.Result == checker.NotLinearizable {
		out = append(out, *w)
	}
	return out
}

// steps are the nemesis steps whose faults were in force at some moment of
// an anomaly, or up to a lease before it, in order. Faults the service made
// itself (a promotion) belong to no step and are left to it.
func steps(h *history.History, res *checker.Result) []int {
	ttl := h.Header.Config.TTLms * int64(time.Millisecond)
	var out []int
	for _, a := range anomalies(res, ttl) {
		for _, f := range res.Faults {
			if f.Step != nil && f.Start <= a.End && f.End >= a.Start-ttl && !slices.Contains(out, *f.Step) {
				out = append(out, *f.Step)
			}
		}
	}
	slices.Sort(out)
	return out
}

// primitive are the faults whose steps a timeline can say in its own
// verbs, aimed exactly where the run aimed them; any other fault (one that
// watches the service, such as a failover or a clock jump on a bare
// majority) is replayed as itself, and aims itself again.
var primitive = []string{"pause-holder", "pause-client", "pause-node", "kill-client"}

// timeline turns the chosen steps into scenario steps.
func timeline(h *history.History, res *checker.Result, chosen []int) []scenario.Step {
	cfg := h.Header.Config
	origin := workloadStart(h)
	ttl := time.Duration(cfg.TTLms) * time.Millisecond
	byStep := map[int][]history.Event{}
	fault := map[int]string{}
	for _, e := range h.Events {
		if e.Process != history.Nemesis || e.Value == nil || e.Value.Step == nil {
			continue
		}
		step := *e.Value.Step
		if e.F == history.NemLanding {
			fault[step] = e.Value.Fault
			continue
		}
		byStep[step] = append(byStep[step], e)
	}
	var out []scenario.Step
	for _, n := range chosen {
		evs := byStep[n]
		if len(evs) == 0 {
			continue
		}
		at := time.Duration(evs[0].Time - origin)
		if s, ok := asPrimitive(fault[n], evs, cfg.Clients, ttl); ok {
			// A step aimed at a failpoint waits for its client there: it
			// may start looking a lease early.
			if s.When != nil {
				at -= ttl
			}
			s.At = scenario.Duration(clampAt(at, cfg))
			out = append(out, s)
			continue
		}
		if fault[n] == "" {
			continue // a step that never said what it was
		}
		// The fault looks for its moment itself: start it a little before
		// it found the one it found.
		out = append(out, scenario.Step{At: scenario.Duration(clampAt(at-ttl, cfg)), Do: "fault", Fault: fault[n]})
	}
	return out
}

// asPrimitive says a pause or kill step in the timeline's verbs.
func asPrimitive(fault string, evs []history.Event, clients int, ttl time.Duration) (scenario.Step, bool) {
	if !slices.Contains(primitive, fault) {
		return scenario.Step{}, false
	}
	for _, e := range evs {
		if e.F != history.NemPause && e.F != history.NemKill {
			continue
		}
		s := scenario.Step{Do: e.F, Target: clientName(e.Value.Target, clients)}
		if e.F == history.NemPause {
			s.For = scenario.Duration(pauseLength(e, evs))
		}
		if fp := e.Value.Failpoint; fp != "" {
			s.When = &scenario.When{Client: s.Target, Reaches: fp}
		}
		return s, true
	}
	return scenario.Step{}, false
}

// pauseLength is how long a pause lasted: as asked, else until its resume.
func pauseLength(pause history.Event, evs []history.Event) time.Duration {
	if pause.Value.DurationMs > 0 {
		return time.Duration(pause.Value.DurationMs) * time.Millisecond
	}
	for _, e := range evs {
		if e.F == history.NemResume && e.Value.Target == pause.Value.Target && e.Time > pause.Time {
			return time.Duration(e.Time - pause.Time).Round(time.Millisecond)
		}
	}
	return 0 // until the end
}

// clientName maps a client process to the client slot a scenario names: a
// client killed and restarted runs under the number of its slot plus the
// number of clients.
func clientName(target string, clients int) string {
	n, err := strconv.Atoi(strings.TrimPrefix(target, "c"))
	if !strings.HasPrefix(target, "c") || err != nil || clients < 1 {
		return target // a node
	}
	return "c" + strconv.Itoa(n%clients)
}

// workloadStart is when the workload started, as the history shows it: the
// first client event (a scenario's times count from there).
func workloadStart(h *history.History) int64 {
	for _, e := range h.Events {
		if e.Process != history.Nemesis {
			return e.Time
		}
	}
	return h.Header.StartTime
}

// clampAt keeps a step's time inside the run, to the millisecond.
func clampAt(at time.Duration, cfg history.RunConfig) time.Duration {
	limit := time.Duration(cfg.TimeLimitMs) * time.Millisecond
	at = at.Truncate(time.Millisecond)
	switch {
	case at < 0:
		return 0
	case at >= limit:
		return limit - time.Millisecond
	}
	return at
}
