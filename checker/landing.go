package checker

import (
	"fmt"

	"github.com/lockcheck/lockcheck/history"
)

// FaultLanding counts a run's nemesis steps (each ends with a landing
// event) and those whose fault met the precondition it exists to create.
type FaultLanding struct {
	Injected int `json:"injected"`
	Landed   int `json:"landed"`
	// Missed is the first step's reason for missing, for the verdict's
	// sentence.
	Missed string `json:"missed,omitempty"`
	// judged is false for a run with no nemesis, and for a history that
	// predates landing events while it has faults: there is nothing to
	// judge them by.
	judged bool
}

// faultLanding reads the landing events of the nemesis and marks each fault
// of faults with its step's landing. Faults of no step (a promotion the
// service made on its own) happened, as observed. A history with faults
// and no landing event predates landing records: its faults are left not
// landed with no reason, and the run is not judged by them.
func faultLanding(nemesis []*history.Event, faults []Fault, cfg history.RunConfig) FaultLanding {
	var l FaultLanding
	steps := map[int]*history.Value{}
	for _, e := range nemesis {
		if e.F != history.NemLanding || e.Value == nil {
			continue
		}
		l.Injected++
		if e.Value.Step != nil {
			steps[*e.Value.Step] = e.Value
		}
		if e.Value.Landed != nil && *e.Value.Landed {
			l.Landed++
		} else if l.Missed == "" {
			l.Missed = missedStep(e.Value)
		}
	}
	legacy := l.Injected == 0 && len(faults) > 0
	l.judged = len(cfg.Nemesis) > 0 && !legacy
	for i := range faults {
		f := &faults[i]
		var v *history.Value
		ok := false
		if f.Step != nil {
			v, ok = steps[*f.Step]
		}
		switch {
		case legacy:
		case f.Step == nil:
			f.Landed, f.Why = true, "observed: the service did it"
		case ok:
			f.Landed, f.Why = v.Landed != nil && *v.Landed, v.Detail
		default:
			f.Why = "its step recorded no landing (the run ended during it)"
		}
	}
	return l
}

// missedStep names a step that missed, and why, as its landing event v
// says: "clock-pause: the minority came back late"; a landing written by
// another program may leave out the detail, or the fault too.
func missedStep(v *history.Value) string {
	switch {
	case v.Fault != "" && v.Detail != "":
		return v.Fault + ": " + v.Detail
	case v.Fault != "":
		return v.Fault + " (its landing event gives no reason)"
	}
	step := "a step"
	if v.Step != nil {
		step = fmt.Sprintf("step %d", *v.Step)
	}
	if v.Detail != "" {
		return step + ": " + v.Detail
	}
	return step + " (its landing event names no fault and gives no reason)"
}

// Judged says whether the run was judged by its landings: it had a nemesis
// and its history records them.
func (l FaultLanding) Judged() bool { return l.judged }

// noFaultLanded is verdict's reason for unknown when a run with a nemesis
// had no fault that landed: a run whose faults never reached their moment
// tested nothing they were meant to test, and unknown is never a pass.
func noFaultLanded(l FaultLanding) bool { return l.judged && l.Landed == 0 }

// noFaultLandedReason says so, as one of the run's unknown reasons; asked
// names the faults the nemesis was asked for.
func noFaultLandedReason(l FaultLanding, asked string) string {
	switch {
	case l.Injected == 0 && asked != "":
		return fmt.Sprintf("No fault landed: the nemesis was asked for %s but injected no fault (the run ended before the first step).", asked)
	case l.Injected == 0:
		return "No fault landed: the run had a nemesis and injected no fault (the run ended before the first step)."
	case l.Injected == 1:
		return fmt.Sprintf("No fault landed: the one injected missed its precondition, so the run did not test what it aims at (%s).", l.Missed)
	}
	return fmt.Sprintf("No fault landed: none of the %d injected met its precondition, so the run did not test what they aim at; the first missed (%s).", l.Injected, l.Missed)
}
