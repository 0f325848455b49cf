package checker

import (
	"cmp"
	"slices"
	"sort"

	"github.com/lockcheck/lockcheck/history"
)

// checkDoubleOwnership finds the windows in which two processes both
// believed they held the same key: overlaps of belief intervals
// [OK, BeliefEnd]. Grants are swept in OK order against the grants whose
// belief is still running; in a working lock that set holds at most one.
func checkDoubleOwnership(keys []*keyFacts, faults []Fault, outcomes *outcomes) DoubleOwnership {
	var res DoubleOwnership
	for _, k := range keys {
		grants := slices.Clone(k.grants)
		slices.SortFunc(grants, func(a, b Grant) int { return cmp.Compare(a.OK, b.OK) })
		writes := slices.Clone(k.writes)
		slices.SortFunc(writes, func(a, b writeOp) int { return cmp.Compare(a.invoke, b.invoke) })
		var believing []Grant
		for _, b := range grants {
			believing = slices.DeleteFunc(believing, func(a Grant) bool { return a.BeliefEnd <= b.OK })
			for _, a := range believing {
				if a.Process == b.Process {
					continue
				}
				w := Window{Key: k.key, Start: b.OK, End: min(a.BeliefEnd, b.BeliefEnd)}
				if w.End <= w.Start {
					continue
				}
				w.Ms = float64(w.End-w.Start) / 1e6
				w.Processes = [2]history.Process{a.Process, b.Process}
				w.Faults = faultNames(faultsDuring(faults, w.Start, w.End))
				first := sort.Search(len(writes), func(i int) bool { return writes[i].invoke >= w.Start })
				for _, wr := range writes[first:] {
					if wr.invoke > w.End {
						break
					}
					if wr.process != a.Process && wr.process != b.Process {
						continue
					}
					w.Writes = append(w.Writes, wr.index)
					if outcomes.of(&wr).accepted == accepted {
						w.Unsafe++
					}
				}
				res.Windows++
				res.TotalMs += w.Ms
				res.MaxMs = max(res.MaxMs, w.Ms)
				res.UnsafeWrites += w.Unsafe
				if len(res.List) < maxEvidence {
					res.List = append(res.List, w)
				}
			}
			believing = append(believing, b)
		}
	}
	return res
}
