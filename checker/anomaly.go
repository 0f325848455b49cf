package checker

// firstAnomaly is the time of the earliest piece of evidence of a check that
// failed: a lease granted over a live one, a double-ownership window whose
// writes landed (unfenced), a lost update or accepted stale write, a fence
// that did not rise, the end of an illegal linearizability segment, the
// first refusal of an orphaned key. ok
// is false when no check failed. It reads the evidence the checks kept
// (the first maxEvidence items of each), so in a history with more
// anomalies than that on several keys it is the earliest of those kept.
func firstAnomaly(r *Result, fenced bool) (at int64, ok bool) {
	eachAnomaly(r, fenced, func(t int64) {
		if !ok || t < at {
			at, ok = t, true
		}
	})
	return at, ok
}

// anomalyUnderFault says whether some evidence of a failed check lies
// within a fault's interval: then the run did test what its faults aim
// at, whatever their landings say (one that the run's end cut short).
func anomalyUnderFault(r *Result, fenced bool) bool {
	under := false
	eachAnomaly(r, fenced, func(t int64) {
		under = under || len(faultsDuring(r.Faults, t, t)) > 0
	})
	return under
}

// eachAnomaly calls note with the time of each piece of evidence of a check
// that failed, as firstAnomaly says.
func eachAnomaly(r *Result, fenced bool, note func(int64)) {
	c := &r.Checks
	ctx := JudgeContext{Fenced: fenced, T0: r.Span.Start}
	failed := func(j Judged) bool { return j.Judge(ctx).Status == StatusFailed }
	if failed(&c.LeaseSafety) {
		for _, v := range c.LeaseSafety.Evidence {
			note(v.Later.OK)
		}
	}
	if failed(&c.DoubleOwnership) {
		for _, w := range c.DoubleOwnership.List {
			if w.Unsafe > 0 {
				note(w.Start)
			}
		}
	}
	if failed(&c.Resource) {
		for _, a := range c.Resource.Anomalies {
			if a.Kind == LostUpdate || a.Kind == StaleWriteAccepted {
				note(a.Time)
			}
		}
	}
	if failed(&c.Fencing) {
		for _, a := range c.Fencing.Anomalies {
			note(a.Later.OK)
		}
	}
	if failed(&c.Linearizability) && c.Linearizability.Window != nil {
		// Somewhere in the segment; certain only once it is complete.
		note(c.Linearizability.Window.End)
	}
	if failed(&c.Liveness) {
		// The first refusal while nobody held the key.
		for _, o := range c.Liveness.Orphans {
			note(o.FirstRefused)
		}
	}
}

// firstAnomalyMs is firstAnomaly in milliseconds from the start of the
// history, nil when no check failed.
func firstAnomalyMs(r *Result, fenced bool) *float64 {
	at, ok := firstAnomaly(r, fenced)
	if !ok {
		return nil
	}
	ms := float64(max(at-r.Span.Start, 0)) / 1e6
	return &ms
}

// CheckAnomalies is how many anomalies one failed check found.
type CheckAnomalies struct {
	Key   string // the check's key in results.json
	Count int
}

// AnomaliesByCheck counts the anomalies of each check that failed, in
// results.json's order: violations, landed writes in double ownership
// (unfenced), lost updates and accepted stale writes, fence regressions
// and duplicates, one for an illegal linearizability result, orphaned
// stretches of a key. fenced says whether the workload's resource checks
// fences.
func AnomaliesByCheck(r *Result, fenced bool) []CheckAnomalies {
	c := &r.Checks
	counts := map[string]int{
		"lease_safety":     c.LeaseSafety.Violations,
		"double_ownership": c.DoubleOwnership.UnsafeWrites,
		"resource":         c.Resource.LostUpdates + c.Resource.StaleWritesAccepted,
		"fencing":          c.Fencing.Regressions + c.Fencing.Duplicates,
		"linearizability":  1,
		"liveness":         c.Liveness.Orphaned,
	}
	var out []CheckAnomalies
	for _, nc := range c.List() {
		if nc.Check.Judge(JudgeContext{Fenced: fenced, T0: r.Span.Start}).Status == StatusFailed {
			out = append(out, CheckAnomalies{Key: nc.Key, Count: max(counts[nc.Key], 1)})
		}
	}
	return out
}
