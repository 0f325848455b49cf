package results

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// Measure reads what a sweep measures of a run from its directory: its
// results and its history. r must have Ran.
func Measure(runDir string, r *Results) (*RunMeasures, error) {
	ch := &r.Checks
	m := &RunMeasures{
		Failed: []string{}, LongestWindowMs: ch.DoubleOwnership.MaxMs, StaleRefused: ch.Resource.StaleWritesRefused,
		AcquireP50Ms: ch.Liveness.AcquireP50Ms, AcquireP99Ms: ch.Liveness.AcquireP99Ms, GrantsPerSec: ch.Liveness.GrantsPerSec,
		RecoveriesMs: []float64{},
	}
	ctx := checker.JudgeContext{Fenced: r.Config.Guarded()}
	settled := true
	for _, nc := range ch.List() {
		switch nc.Check.Judge(ctx).Status {
		case checker.StatusFailed:
			m.Failed = append(m.Failed, nc.Key)
			settled = false
		case checker.StatusUnknown:
			settled = false
		}
	}
	f, err := os.Open(filepath.Join(runDir, HistoryFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var scan runScan
	if _, err := history.Stream(f, func(history.Header) error { return nil }, scan.event); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(runDir, HistoryFile), err)
	}
	scan.finish(m)
	if m.DurationMs > 0 {
		m.WindowsPerMinute = float64(ch.DoubleOwnership.Windows) / (m.DurationMs / 60000)
	}
	// Held within the lease: the verdict is unknown only because no fault
	// met its precondition, and every fault was delivered in full but
	// those the end of the run cut short.
	full, cut := scan.delivered()
	m.WithinLease = r.Valid == checker.Unknown && settled && len(r.UnknownReasons) == 1 &&
		r.FaultLanding.Landed == 0 && r.FaultLanding.Injected > 0 && full > 0 && full+cut >= r.FaultLanding.Injected
	return m, nil
}

// runScan follows a run's history for the availability cost: when each
// fault began and when the next grant came, and whether each pause lasted
// as long as it was asked.
type runScan struct {
	first, last int64
	seen        bool
	// waiting are the start times of faults not yet followed by a grant.
	waiting   []int64
	recovered []float64
	// paused are the open pauses by target.
	paused map[string]pause
	pauses []pause
	kills  int
}

// pause is one stop of a target: when it began, how long it was asked to
// last and how long it did (-1 while open).
type pause struct{ start, asked, held int64 }

func (s *runScan) event(e *history.Event) error {
	if !s.seen {
		s.first, s.seen = e.Time, true
	}
	s.last = e.Time
	if e.Process != history.Nemesis {
		if e.Type == history.OK && e.F == history.FAcquire {
			for _, t := range s.waiting {
				s.recovered = append(s.recovered, float64(e.Time-t)/1e6)
			}
			s.waiting = s.waiting[:0]
		}
		return nil
	}
	var target string
	var asked int64
	if e.Value != nil {
		target, asked = e.Value.Target, e.Value.DurationMs*1e6
	}
	switch v := history.VerbOf(e.F); {
	case e.F == history.NemPause:
		if s.paused == nil {
			s.paused = map[string]pause{}
		}
		s.paused[target] = pause{start: e.Time, asked: asked, held: -1}
		s.waiting = append(s.waiting, e.Time)
	case e.F == history.NemResume:
		if p, ok := s.paused[target]; ok {
			p.held = e.Time - p.start
			s.pauses = append(s.pauses, p)
			delete(s.paused, target)
		}
	case e.F == history.NemKill:
		s.kills++
		s.waiting = append(s.waiting, e.Time)
	case v.Role == history.Starts || v.Role == history.Point:
		s.waiting = append(s.waiting, e.Time)
	}
	return nil
}

// delivered counts the faults delivered in full (each pause held as long
// as asked, a few ms of timer slack aside, and each kill) and those the
// end of the run cut short: only the end of the run ends a pause early
// (the nemesis's context), so that is the last pause, if it fell short.
func (s *runScan) delivered() (full, cut int) {
	for _, p := range s.paused {
		p.held = -1
		s.pauses = append(s.pauses, p)
	}
	slices.SortFunc(s.pauses, func(a, b pause) int { return cmp.Compare(a.start, b.start) })
	for i, p := range s.pauses {
		switch {
		case p.held >= 0 && p.held+5e6 >= p.asked:
			full++
		case i == len(s.pauses)-1:
			cut++
		}
	}
	return full + s.kills, cut
}

func (s *runScan) finish(m *RunMeasures) {
	m.RecoveriesMs = append(m.RecoveriesMs, s.recovered...)
	m.RecoveryNeverCame = len(s.waiting)
	m.DurationMs = float64(s.last-s.first) / 1e6
}
