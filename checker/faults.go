package checker

import (
	"github.com/lockcheck/lockcheck/history"
)

// collectFaults turns nemesis events into fault intervals. A pause lasts
// until the resume of the same target (or the end of the history); a kill
// is a point, or lasts until the target starts again. Verbs that only
// observe (run-end, inspect, failpoint) are not faults; verbs this checker
// does not know yet are points.
func collectFaults(nemesis []*history.Event, spanEnd int64) []Fault {
	faults := []Fault{}
	open := map[string]int{} // kind + target -> index in faults of an unhealed fault
	for _, e := range nemesis {
		var target, failpoint string
		if e.Value != nil {
			target, failpoint = e.Value.Target, e.Value.Failpoint
		}
		switch e.F {
		case history.NemRunEnd, history.NemInspect, history.NemFailpoint:
			continue
		case history.NemResume, history.NemStart:
			healed := history.NemPause
			if e.F == history.NemStart {
				healed = history.NemKill
			}
			if i, ok := open[healed+" "+target]; ok {
				faults[i].End = e.Time
				delete(open, healed+" "+target)
			}
			continue
		}
		f := Fault{Kind: e.F, Target: target, Start: e.Time, End: e.Time, Failpoint: failpoint, Index: e.Index}
		switch e.F {
		case history.NemPause:
			f.End = spanEnd
			open[e.F+" "+target] = len(faults)
		case history.NemKill:
			open[e.F+" "+target] = len(faults)
		}
		faults = append(faults, f)
	}
	return faults
}

// faultsDuring lists the faults in force at some moment of [start, end].
// Faults are few (one per nemesis action), so a scan is cheap.
func faultsDuring(faults []Fault, start, end int64) []Fault {
	var in []Fault
	for _, f := range faults {
		if f.Start <= end && f.End >= start {
			in = append(in, f)
		}
	}
	return in
}

// faultNames describes faults as the evidence lists them: "pause c3".
func faultNames(faults []Fault) []string {
	var names []string
	for _, f := range faults {
		name := f.Kind + " " + f.Target
		if f.Failpoint != "" {
			name += " at failpoint " + f.Failpoint
		}
		names = append(names, name)
	}
	return names
}

// faultPhrase says in words what a fault did, for reason sentences:
// "while c3 was paused".
func faultPhrase(f Fault) string {
	switch f.Kind {
	case history.NemPause:
		return "while " + f.Target + " was paused"
	case history.NemKill:
		return "after " + f.Target + " was killed"
	}
	return "during " + f.Kind + " of " + f.Target
}
