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

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/program"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/nemesis"
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
	return write(path, FromRun(filepath.Base(dir), h, res), header(h.Header.Config))
}

// header is repro.yaml's opening comment for a run of cfg: that this
// repro's replay rate was not measured (and a class rate, cited as such),
// and how to replay it.
func header(cfg history.RunConfig) string {
	return "# Replay rate: " + results.ReplayRate(cfg) + ".\n# Replay it: lockcheck scenario run --file " + File + "\n"
}

// WriteScenario writes repro.yaml into dir for a run of scenario f that
// ended false (FromScenario) and returns its path, or "" when the run did
// not end false.
func WriteScenario(dir string, f *scenario.File, h *history.History, res *checker.Result) (string, error) {
	if res.Valid != checker.Invalid {
		return "", nil
	}
	return write(filepath.Join(dir, File), FromScenario(f, h, res), "")
}

// write writes the reproduction f to path, atomically, after comment.
func write(path string, f *scenario.File, comment string) (string, error) {
	data, err := f.Marshal()
	if err != nil {
		return "", err
	}
	data = append([]byte(comment), data...)
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
	if c := cfg.Client; c != nil {
		f.Client = &scenario.Client{Command: program.JoinCommand(c.Command), Topology: c.Topology, Name: c.Name}
	}
	f.Timeline = timeline(h, res, steps(h, res))
	f.TimeLimit = scenario.Duration(timeLimit(h, res, f.Timeline))
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

// anomaly is the span of one thing a failing check found and, for a
// lease-safety violation, the grant whose lease the later one broke.
type anomaly struct {
	checker.Interval
	earlier *checker.Grant
}

// anomalies are the spans of everything the failing checks found. The
// linearizability window (which spans every operation of a failing
// segment, seconds long) counts only when linearizability is the only
// check that failed: otherwise the anomalies of the others say where the
// failure is.
func anomalies(res *checker.Result, ttl int64, linearizability bool) []anomaly {
	var out []anomaly
	for _, v := range res.Checks.LeaseSafety.Evidence {
		out = append(out, anomaly{checker.Interval{Start: v.Earlier.Invoke, End: v.Later.OK}, &v.Earlier})
	}
	for _, w := range res.Checks.DoubleOwnership.List {
		out = append(out, anomaly{Interval: checker.Interval{Start: w.Start, End: w.End}})
	}
	for _, a := range res.Checks.Resource.Anomalies {
		// A lost update is a write computed from a value read up to a
		// lease earlier.
		out = append(out, anomaly{Interval: checker.Interval{Start: a.Time - ttl, End: a.Time}})
	}
	for _, a := range res.Checks.Fencing.Anomalies {
		out = append(out, anomaly{Interval: checker.Interval{Start: a.Earlier.Invoke, End: a.Later.OK}})
	}
	if w := res.Checks.Linearizability.Window; linearizability && w != nil && res.Checks.Linearizability.Result == checker.NotLinearizable {
		out = append(out, anomaly{Interval: *w})
	}
	return out
}

// onlyLinearizability says whether linearizability is the one check that
// failed.
func onlyLinearizability(h *history.History, res *checker.Result) bool {
	failed := FailedChecks(h.Header.Config.Fenced(), &res.Checks)
	return len(failed) == 1 && failed[0] == "linearizability"
}

// steps are the nemesis steps whose faults were in force at some moment of
// an anomaly, or up to a lease before it, in order. Faults the service made
// itself (a promotion) belong to no step and are left to it.
func steps(h *history.History, res *checker.Result) []int {
	ttl := int64(grantedLease(h))
	var out []int
	for _, a := range anomalies(res, ttl, onlyLinearizability(h, res)) {
		for _, f := range res.Faults {
			if f.Step != nil && f.Start <= a.End && f.End >= a.Start-ttl && !slices.Contains(out, *f.Step) {
				out = append(out, *f.Step)
			}
		}
	}
	// Fences are state the whole run built: a multi-node lock's fences
	// from counters on its nodes regress once the nodes of a majority fell
	// behind the others, by every wipe that reset a counter and every
	// pause that sent the grants to other nodes. Every step before the
	// last fence anomaly stays.
	if last := lastFenceAnomaly(res); last > 0 {
		for _, f := range res.Faults {
			if f.Step != nil && f.Start <= last && !slices.Contains(out, *f.Step) {
				out = append(out, *f.Step)
			}
		}
	}
	slices.Sort(out)
	return out
}

// grantedLease is the lease the reproduction's timings are measured in:
// the longest a grant of the run reported (a library may take its own,
// python-etcd3 60 s), else the lease the backend grants for the run's
// --ttl, else the TTL asked.
func grantedLease(h *history.History) time.Duration {
	var longest int64
	for _, e := range h.Events {
		if e.Type == history.OK && e.F == history.FAcquire && e.Value != nil {
			longest = max(longest, e.Value.TTLms)
		}
	}
	switch cfg := h.Header.Config; {
	case longest > 0:
		return time.Duration(longest) * time.Millisecond
	case cfg.LeaseMs > 0:
		return time.Duration(cfg.LeaseMs) * time.Millisecond
	default:
		return time.Duration(cfg.TTLms) * time.Millisecond
	}
}

// lastFenceAnomaly is when the last fence regression or duplicate was
// seen, 0 when none was.
func lastFenceAnomaly(res *checker.Result) int64 {
	var last int64
	for _, a := range res.Checks.Fencing.Anomalies {
		last = max(last, a.Later.OK)
	}
	return last
}

// timeLimit ends the reproduction shortly after the last anomaly it
// expects and the last of its steps: four leases and a second (a late
// write, the next grants), within the run's own time limit.
func timeLimit(h *history.History, res *checker.Result, tl []scenario.Step) time.Duration {
	cfg := h.Header.Config
	ttl := grantedLease(h)
	origin := workloadStart(h)
	end := time.Duration(0)
	for _, a := range anomalies(res, int64(ttl), onlyLinearizability(h, res)) {
		end = max(end, time.Duration(a.End-origin))
	}
	for _, s := range tl {
		last := s.At.D() + s.For.D()
		switch {
		case s.When != nil && s.When.Reaches == nemesis.MomentBareMajority:
			last += nemesis.BareMajorityWait // room to meet the race again
		case s.When != nil:
			last += ttl // it started looking a lease early
		}
		end = max(end, last)
	}
	limit := time.Duration(cfg.TimeLimitMs) * time.Millisecond
	return min(limit, (end + 4*ttl + time.Second).Round(time.Millisecond))
}

// timeline turns the chosen steps into scenario steps.
func timeline(h *history.History, res *checker.Result, chosen []int) []scenario.Step {
	cfg := h.Header.Config
	origin := workloadStart(h)
	ttl := grantedLease(h)
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
	p := pinner{cfg: cfg, origin: origin, ttl: ttl, nodes: nodeCount(cfg), res: res}
	var out []scenario.Step
	for _, n := range chosen {
		evs := byStep[n]
		if len(evs) == 0 {
			continue
		}
		if pinned := p.pin(fault[n], evs); len(pinned) > 0 {
			out = append(out, pinned...)
			continue
		}
		if fault[n] == "" {
			continue // a step that never said what it was
		}
		// The fault looks for its moment itself: start it a little before
		// it found the one it found.
		at := time.Duration(evs[0].Time - origin)
		out = append(out, scenario.Step{At: scenario.Duration(clampAt(at-ttl, cfg)), Do: "fault", Fault: fault[n]})
	}
	// The steps run in the order the run did them: one that starts
	// looking for its moment early does not start before the step that
	// came before it.
	for i := 1; i < len(out); i++ {
		out[i].At = max(out[i].At, out[i-1].At)
	}
	return out
}

// pinner says a run's steps in the timeline's verbs.
type pinner struct {
	cfg    history.RunConfig
	origin int64
	ttl    time.Duration
	nodes  int
	res    *checker.Result
}

// pin says the step of fault that recorded evs as the scenario steps that
// do exactly what it did, or none when the timeline has no verbs for it
// (a failover, a strobing clock, a container cut off whole, a fault that
// waits for its moment in the service itself).
func (p pinner) pin(fault string, evs []history.Event) []scenario.Step {
	var out []scenario.Step
	switch fault {
	case "pause-holder", "pause-client", "pause-node", "kill-client":
		for _, e := range evs {
			if e.F == history.NemPause || e.F == history.NemKill {
				return []scenario.Step{p.clientStep(e, evs)}
			}
		}
	case "pause-nodes":
		for _, e := range evs {
			if e.F == history.NemPause {
				out = append(out, p.clientStep(e, evs))
			}
		}
	case "kill-restart":
		if d := p.cfg.Params[nemesis.ParamRestartDelay]; d != "" && d != "0s" {
			return nil // the restart verb does not wait: the fault keeps its delay
		}
		for _, e := range evs {
			if e.F == history.NemKill {
				s := scenario.Step{Do: "restart", Target: e.Value.Target, Wipe: e.Value.Detail == nemesis.DetailWiped}
				out = append(out, p.atMoment(s, e.Time, s.Wipe))
			}
		}
	case "clock-skew":
		for _, e := range evs {
			if e.F != history.NemClockJump {
				continue
			}
			offset, err := time.ParseDuration(e.Value.Detail)
			if err != nil {
				return nil // a strobe: the fault strobes again
			}
			s := scenario.Step{Do: "clock", Target: e.Value.Target, Offset: scenario.Duration(offset)}
			for _, r := range evs {
				if r.F == history.NemClockReset && r.Value.Target == e.Value.Target && r.Time > e.Time {
					s.For = scenario.Duration(time.Duration(r.Time - e.Time).Round(time.Millisecond))
					break
				}
			}
			out = append(out, p.atMoment(s, e.Time, offset > 0))
		}
	case "partition", "partition-minority", "partition-halves", "partition-bridge":
		return p.partitions(evs)
	}
	return out
}

// partitions says a partition fault's cuts as partition steps: each
// target cut from the links its event lists, for as long as it held until
// its heal. Links a step records from both sides (two halves) are cut
// once, by the first of their events. A cut that lists no links (a
// container disconnected whole) cannot be said so: the fault runs again.
func (p pinner) partitions(evs []history.Event) []scenario.Step {
	var out []scenario.Step
	cut := map[[2]string]bool{}
	for i, e := range evs {
		if e.F != history.NemPartition {
			continue
		}
		if len(e.Value.Links) == 0 {
			return nil
		}
		target := clientName(e.Value.Target, p.cfg.Clients)
		s := scenario.Step{Do: "partition", Target: target, For: scenario.Duration(time.Duration(e.Value.DurationMs) * time.Millisecond)}
		for _, l := range e.Value.Links {
			l = clientName(l, p.cfg.Clients)
			if !cut[[2]string{target, l}] {
				cut[[2]string{target, l}], cut[[2]string{l, target}] = true, true
				s.Links = append(s.Links, l)
			}
		}
		for _, h := range evs[i+1:] {
			if h.F == history.NemHeal && h.Value.Target == e.Value.Target {
				s.For = scenario.Duration(time.Duration(h.Time - e.Time).Round(time.Millisecond))
				break
			}
		}
		if len(s.Links) > 0 && s.For > 0 {
			out = append(out, p.atMoment(s, e.Time, false))
		}
	}
	return out
}

// clientStep says a pause or kill of a client or node as the run did it,
// at its failpoint if it waited at one.
func (p pinner) clientStep(e history.Event, evs []history.Event) scenario.Step {
	s := scenario.Step{Do: e.F, Target: clientName(e.Value.Target, p.cfg.Clients)}
	if e.F == history.NemPause {
		s.For = scenario.Duration(pauseLength(e, evs))
	}
	// From the step's first event: a failpoint's arrival comes before
	// the pause.
	at := time.Duration(evs[0].Time - p.origin)
	if fp := e.Value.Failpoint; fp != "" {
		// A step aimed at a failpoint waits for its client there: it may
		// start looking a lease early.
		s.When = &scenario.When{Client: s.Target, Reaches: fp}
		at -= p.ttl
	} else if p.duringFailover(e.Time) {
		s.When = failoverGrant
		at -= p.ttl
	}
	s.At = scenario.Duration(clampAt(at, p.cfg))
	return s
}

// failoverGrant is the moment of a grant during a failover, in any client.
var failoverGrant = &scenario.When{Client: nemesis.AnyClient, Reaches: nemesis.MomentFailoverGrant}

// duringFailover says whether a step done at t followed a failover whose
// grant broke a lease: within a lease after a switch-master, from which a
// lease violation's later grant was asked for and granted within a lease
// (the new master's grant while the old master's lease stood). Such a
// step waits for that moment again (failover-grant, any client), looking
// from a lease before: the failover comes when the service decides.
func (p pinner) duringFailover(t int64) bool {
	ttl := int64(p.ttl)
	for _, f := range p.res.Faults {
		if f.Kind != history.NemSwitchMaster || t < f.Start || t > f.Start+ttl {
			continue
		}
		for _, v := range p.res.Checks.LeaseSafety.Evidence {
			if v.Later.Invoke >= f.Start && v.Later.OK <= f.Start+ttl {
				return true
			}
		}
	}
	return false
}

// atMoment times step s, done at t: when it made a node forget the keys it
// holds (forgets) while a lease that a later grant broke stood on a bare
// majority with that node among them, it waits for that moment again
// (bare-majority: any client granted on a bare majority that includes the
// node), starting to look a lease early; when it followed a failover whose
// grant broke a lease, it waits for a grant during a failover
// (duringFailover); otherwise it runs at t.
func (p pinner) atMoment(s scenario.Step, t int64, forgets bool) scenario.Step {
	at := time.Duration(t - p.origin)
	if forgets {
		for _, v := range p.res.Checks.LeaseSafety.Evidence {
			g := v.Earlier
			if t >= g.Invoke && t <= v.Later.OK && slices.Contains(g.Nodes, s.Target) && nemesis.BareMajority(g.Nodes, p.nodes) {
				// Whichever client is granted so: the race comes five
				// times as often to one of five clients as to the one
				// that won it in the run.
				s.When = &scenario.When{Client: nemesis.AnyClient, Reaches: nemesis.MomentBareMajority, Node: s.Target}
				at -= p.ttl
				break
			}
		}
	}
	if s.When == nil && p.duringFailover(t) {
		s.When = failoverGrant
		at -= p.ttl
	}
	s.At = scenario.Duration(clampAt(at, p.cfg))
	return s
}

// nodeCount is how many nodes the run's service has, 0 when the backend is
// not in this program.
func nodeCount(cfg history.RunConfig) int {
	name, variant := cfg.Backend, cfg.Variant
	if cfg.Client != nil {
		// A lock client program runs on its topology's nodes.
		name, variant = cfg.Client.Topology, ""
	}
	b, _, err := catalog.Lookup(name, variant)
	if err != nil {
		return 0
	}
	return len(b.Nodes(catalog.Programs{}, cfg.Params))
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
