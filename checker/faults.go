package checker

import (
	"slices"
	"strings"

	"github.com/lockcheck/lockcheck/history"
)

// collectFaults turns nemesis events into fault intervals, as the verb
// table (history.VerbOf) says: a fault that starts lasts until the verb that
// heals it on the same target, or one that ends it (a kill ends a pause), or
// the end of the history when it lasts until healed; a kill nobody restarts
// and every point verb (a promotion, verbs this checker does not know) are
// points. Verbs that only observe are not faults.
func collectFaults(nemesis []*history.Event, spanEnd int64) []Fault {
	faults := []Fault{}
	open := map[string]int{} // verb + target -> index in faults of an unhealed fault
	for _, e := range nemesis {
		var target, failpoint, detail string
		var step *int
		if e.Value != nil {
			target, failpoint, detail = e.Value.Target, e.Value.Failpoint, e.Value.Detail
			if e.Value.Step != nil {
				step = history.Int(*e.Value.Step) // a copy: the event's value is not kept
			}
		}
		heal := func(verb string) {
			if i, ok := open[verb+" "+target]; ok {
				faults[i].End = e.Time
				delete(open, verb+" "+target)
			}
		}
		v := history.VerbOf(e.F)
		switch v.Role {
		case history.Observes:
			continue
		case history.Heals:
			heal(v.Heals)
			continue
		}
		f := Fault{Kind: e.F, Target: target, Start: e.Time, End: e.Time, Failpoint: failpoint, Index: e.Index, Step: step}
		if e.F == history.NemClockJump {
			f.Detail = detail // the offset is the story
		}
		if e.F == history.NemPartition && len(e.Value.Links) > 0 {
			f.Detail = "cut off from " + strings.Join(e.Value.Links, ", ") // only some links were cut
		}
		if v.Role == history.Starts {
			for _, ended := range v.Ends {
				heal(ended)
			}
			if v.UntilEnd {
				f.End = spanEnd
			}
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
		if f.Kind == history.NemClockJump && f.Detail != "" {
			name += " " + f.Detail
		}
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
	case history.NemSwitchMaster:
		return "after the failover to " + f.Target
	case history.NemPartition:
		if f.Detail != "" {
			return "while " + f.Target + " was " + f.Detail
		}
		return "while " + f.Target + " was cut off the network"
	case history.NemClockJump:
		if f.Detail != "" {
			return "after " + f.Target + "'s clock jumped " + f.Detail
		}
		return "after " + f.Target + "'s clock jumped"
	}
	return "during " + f.Kind + " of " + f.Target
}

// forgets tells whether a fault can make a node forget a key before its TTL
// ran out: a forward clock jump expires it, a kill of a node that keeps
// nothing on disk loses it. Pauses only delay.
func forgets(f Fault) bool {
	return f.Kind == history.NemKill || f.Kind == history.NemClockJump
}

// leaseFault picks, among the faults in force during a lease violation, the
// one that explains it: a fault that made a node forget the earlier grant's
// key, preferring a node that also granted the later one (the node both
// majorities share), else the latest fault. When the grants do not name
// their nodes (a library that does not say), a node that was stopped all
// through the earlier acquire cannot have granted it and is passed over.
func leaseFault(fs []Fault, v LeaseViolation) *Fault {
	granted := func(node string) bool {
		if len(v.Earlier.Nodes) > 0 {
			return slices.Contains(v.Earlier.Nodes, node)
		}
		return !slices.ContainsFunc(fs, func(p Fault) bool {
			return p.Kind == history.NemPause && p.Target == node && p.Start <= v.Earlier.Invoke && p.End >= v.Earlier.OK
		})
	}
	var onEarlier *Fault
	for i := len(fs) - 1; i >= 0; i-- {
		f := &fs[i]
		if !forgets(*f) || !granted(f.Target) {
			continue
		}
		if slices.Contains(v.Later.Nodes, f.Target) {
			return f
		}
		if onEarlier == nil {
			onEarlier = f
		}
	}
	if onEarlier != nil {
		return onEarlier
	}
	if len(fs) > 0 {
		return &fs[len(fs)-1]
	}
	return nil
}

// LeaseFault is the fault that explains lease violation v of r, as the
// verdict names it, or nil: for a report that tells the incident.
func LeaseFault(r *Result, v LeaseViolation) *Fault {
	return leaseFault(faultsDuring(r.Faults, v.Earlier.OK, v.Later.OK), v)
}
