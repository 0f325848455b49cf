package checker

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/lockcheck/lockcheck/history"
)

// Kinds of fence anomalies.
const (
	FenceDuplicate  = "duplicate"
	FenceRegression = "regression"
)

// checkFencing checks that fences rise with the real-time order of grants,
// per key, over the grants that carry a fence. A fence handed to more than
// one grant is a duplicate (each extra grant counts once). A grant asked for
// after another grant completed (B.Invoke > A.OK, so A is certainly earlier)
// with a lower fence is a regression; sweeping grants by invoke against a
// pointer over grants by OK keeps the highest fence certainly before each.
// An anomaly across a promotion is explained by it: see fenceCause.
func checkFencing(keys []*keyFacts, faults []Fault) Fencing {
	res := Fencing{Valid: true}
	note := func(kind string, earlier, later Grant) {
		if len(res.Anomalies) < maxEvidence {
			res.Anomalies = append(res.Anomalies, FenceAnomaly{Kind: kind, Earlier: earlier, Later: later, Cause: fenceCause(faults, earlier, later)})
		}
	}
	for _, k := range keys {
		var fenced []Grant
		for _, g := range k.grants {
			if g.Fence != nil {
				fenced = append(fenced, g)
			}
		}
		if len(fenced) == 0 {
			continue
		}
		res.Checked = true

		byFence := slices.Clone(fenced)
		slices.SortFunc(byFence, func(a, b Grant) int {
			return cmp.Or(cmp.Compare(*a.Fence, *b.Fence), cmp.Compare(a.OK, b.OK))
		})
		first := 0 // the earliest grant of the current fence value
		for i := 1; i < len(byFence); i++ {
			if *byFence[i].Fence != *byFence[first].Fence {
				first = i
				continue
			}
			res.Duplicates++
			note(FenceDuplicate, byFence[first], byFence[i])
		}

		byOK := fenced
		slices.SortFunc(byOK, func(a, b Grant) int { return cmp.Compare(a.OK, b.OK) })
		byInvoke := byFence // reuse: its order is no longer needed
		slices.SortFunc(byInvoke, func(a, b Grant) int { return cmp.Compare(a.Invoke, b.Invoke) })
		highest, next := -1, 0
		for _, b := range byInvoke {
			for ; next < len(byOK) && byOK[next].OK < b.Invoke; next++ {
				if highest < 0 || *byOK[next].Fence > *byOK[highest].Fence {
					highest = next
				}
			}
			if highest >= 0 && *b.Fence < *byOK[highest].Fence {
				res.Regressions++
				note(FenceRegression, byOK[highest], b)
			}
		}
	}
	res.Valid = res.Duplicates == 0 && res.Regressions == 0
	if !res.Checked {
		res.State, res.StateReason = StateSkipped, "no grant carried a fence"
	}
	return res
}

// fenceCause explains a fence that went back when a replica was promoted
// between the earlier grant's acquire and the later grant: the fence counter
// lives on the master and replication is asynchronous, so the promoted
// replica may never have seen the earlier INCR and hands its number out
// again.
func fenceCause(faults []Fault, earlier, later Grant) string {
	for _, f := range faults {
		if f.Kind == history.NemSwitchMaster && f.Start >= earlier.Invoke && f.Start <= later.OK {
			return "INCR after failover: " + f.Target + " was promoted between the two grants without having seen the earlier INCR, so the fence counter went back"
		}
	}
	return ""
}

// Fencing: fences must rise with the real-time order of grants.
type Fencing struct {
	Valid       bool           `json:"valid"`
	Regressions int            `json:"regressions"`
	Duplicates  int            `json:"duplicates"`
	Checked     bool           `json:"checked"` // false when no grant carried a fence
	Anomalies   []FenceAnomaly `json:"anomalies,omitempty"`
	Applicability
}

// FenceAnomaly is a grant whose fence did not rise above an earlier grant's.
type FenceAnomaly struct {
	Kind    string `json:"kind"` // regression or duplicate
	Earlier Grant  `json:"earlier"`
	Later   Grant  `json:"later"`
	// Cause says why the fence went back, when the history shows it: a
	// failover between the two grants (INCR after failover).
	Cause string `json:"cause,omitempty"`
}

// Judge fails fencing on a fence that did not rise, and skips it when no
// grant carried a fence.
func (f *Fencing) Judge(JudgeContext) Judgement {
	if f.Valid && f.Regressions == 0 && f.Duplicates == 0 {
		if !f.Checked {
			return Judgement{StatusSkipped, "No grant carried a fence, so fence order was not checked."}
		}
		return Judgement{Status: StatusOK}
	}
	msg := fmt.Sprintf("Fences did not rise with the order of grants: %s, %s.", Plural(f.Regressions, "regression"), Plural(f.Duplicates, "duplicate"))
	for _, a := range f.Anomalies {
		if a.Cause != "" {
			msg += " This is INCR after failover: the fence counter lives on the master, and a promoted replica that had not seen its last INCRs handed their numbers out again."
			break
		}
	}
	return Judgement{StatusFailed, msg}
}
