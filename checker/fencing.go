package checker

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/lockcheck/lockcheck/history"
)

// Kinds of fence anomalies.
const (
	FenceDuplicate  = "duplicate"
	FenceRegression = "regression"
)

// fenceOrder is what the fencing check keeps of a key's settled grants:
// the fences handed out, and the highest fence certainly granted before
// any acquire still to be judged.
type fenceOrder struct {
	checked bool
	seen    fenceSet
	// base is the grant of the highest fence among the settled grants
	// granted before the earliest acquire still pending at the last
	// settling; carry are the settled fenced grants from then on, by OK.
	base  *Grant
	carry []Grant
	// head is the highest fence an earlier segment of a soak handed out
	// (history.SegmentHead), as a grant before the history (Index -1).
	head *Grant

	duplicates, regressions []FenceAnomaly // the first maxEvidence of each, in the order found
	dupN, regN              int
}

// settle checks fenced, one stretch of a key's grants, against the grants
// settled before it: fences must rise with the real-time order of grants
// that carry one. A fence handed to more than one grant is a duplicate
// (each extra grant counts once). A grant asked for after another grant
// completed (B.Invoke > A.OK, so A is certainly earlier) with a lower fence
// is a regression; sweeping grants by invoke against a pointer over grants
// by OK keeps the highest fence certainly before each. pendingFrom is the
// invoke of the earliest acquire still pending, never when none is: the
// grants it may still get are judged against what was granted before it.
// startAfter starts a key's fence order after fence, the highest an
// earlier segment of a soak handed out for key, before start: every grant
// of this segment must carry a higher one.
func (o *fenceOrder) startAfter(key string, fence, start int64) {
	o.head = &Grant{Key: key, Fence: history.Int64(fence), Invoke: start, OK: start, Index: -1}
	o.base = o.head
}

func (o *fenceOrder) settle(fenced []Grant, pendingFrom int64) {
	if len(fenced) == 0 {
		return
	}
	o.checked = true
	byFence := slices.Clone(fenced)
	slices.SortFunc(byFence, func(a, b Grant) int {
		return cmp.Or(cmp.Compare(*a.Fence, *b.Fence), cmp.Compare(a.OK, b.OK))
	})
	first := 0 // the earliest grant of the current fence value
	for i := range byFence {
		switch {
		case o.head != nil && *byFence[i].Fence == *o.head.Fence:
			o.note(&o.duplicates, &o.dupN, FenceDuplicate, *o.head, byFence[i])
			continue
		case o.seen.has(*byFence[i].Fence):
			// A settled grant had it first; only its fence is kept.
			o.note(&o.duplicates, &o.dupN, FenceDuplicate, Grant{Key: byFence[i].Key, Fence: byFence[i].Fence}, byFence[i])
			continue
		case i == 0 || *byFence[i].Fence != *byFence[first].Fence:
			first = i
			continue
		}
		o.note(&o.duplicates, &o.dupN, FenceDuplicate, byFence[first], byFence[i])
	}
	for _, g := range fenced {
		o.seen.add(*g.Fence)
	}

	byOK := append(slices.Clone(o.carry), fenced...)
	slices.SortFunc(byOK, func(a, b Grant) int { return cmp.Compare(a.OK, b.OK) })
	byInvoke := byFence // reuse: its order is no longer needed
	slices.SortFunc(byInvoke, func(a, b Grant) int { return cmp.Compare(a.Invoke, b.Invoke) })
	highest, next := o.base, 0
	for _, b := range byInvoke {
		for ; next < len(byOK) && byOK[next].OK < b.Invoke; next++ {
			if highest == nil || *byOK[next].Fence > *highest.Fence {
				highest = &byOK[next]
			}
		}
		if highest != nil && *b.Fence < *highest.Fence {
			o.note(&o.regressions, &o.regN, FenceRegression, *highest, b)
		}
	}
	// Keep what a pending acquire's grant is still judged against.
	o.carry = o.carry[:0]
	for i := range byOK {
		if byOK[i].OK >= pendingFrom {
			o.carry = append(o.carry, byOK[i])
		} else if o.base == nil || *byOK[i].Fence > *o.base.Fence {
			g := byOK[i]
			o.base = &g
		}
	}
}

func (o *fenceOrder) note(list *[]FenceAnomaly, n *int, kind string, earlier, later Grant) {
	*n++
	if len(*list) < maxEvidence {
		*list = append(*list, FenceAnomaly{Kind: kind, Earlier: earlier, Later: later})
	}
}

// fencing gathers the keys' fence anomalies, in key order, each key's
// duplicates before its regressions, explaining each by the faults.
func fencing(keys []*keyFacts, faults []Fault) Fencing {
	res := Fencing{Valid: true}
	for _, k := range keys {
		o := &k.settled.fences
		res.Checked = res.Checked || o.checked
		res.Duplicates += o.dupN
		res.Regressions += o.regN
		for _, list := range [][]FenceAnomaly{o.duplicates, o.regressions} {
			for _, a := range list {
				if len(res.Anomalies) < maxEvidence {
					a.Cause = fenceCause(faults, a.Earlier, a.Later)
					res.Anomalies = append(res.Anomalies, a)
				}
			}
		}
	}
	res.Valid = res.Duplicates == 0 && res.Regressions == 0
	if !res.Checked {
		res.State, res.StateReason = StateSkipped, "no grant carried a fence"
	}
	return res
}

// fenceSet is a set of fences as sorted, disjoint, non-adjacent ranges:
// fences rise one by one, so a long run's fences are a handful of ranges.
type fenceSet struct{ ranges [][2]int64 }

// find is the index of the first range that ends at or after f.
func (s *fenceSet) find(f int64) int {
	return sort.Search(len(s.ranges), func(i int) bool { return s.ranges[i][1] >= f })
}

func (s *fenceSet) has(f int64) bool {
	i := s.find(f)
	return i < len(s.ranges) && s.ranges[i][0] <= f
}

func (s *fenceSet) add(f int64) {
	i := s.find(f - 1) // the first range that ends at f-1 or later: f may extend it
	switch {
	case i < len(s.ranges) && s.ranges[i][0] <= f && f <= s.ranges[i][1]:
		return
	case i < len(s.ranges) && s.ranges[i][1] == f-1:
		s.ranges[i][1] = f
		if i+1 < len(s.ranges) && s.ranges[i+1][0] == f+1 {
			s.ranges[i][1] = s.ranges[i+1][1]
			s.ranges = slices.Delete(s.ranges, i+1, i+2)
		}
	case i < len(s.ranges) && s.ranges[i][0] == f+1:
		s.ranges[i][0] = f
	default:
		s.ranges = slices.Insert(s.ranges, i, [2]int64{f, f})
	}
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

func (f *Fencing) conclude(c *conclusion) { *f = fencing(c.keys, c.faults) }

// AnomalyCount counts the regressions and duplicates.
func (f *Fencing) AnomalyCount() int { return f.Regressions + f.Duplicates }

// AnomalyTimes are the later grants of the anomalies kept.
func (f *Fencing) AnomalyTimes(note func(int64)) {
	for _, a := range f.Anomalies {
		note(a.Later.OK)
	}
}

// EvidenceLines are the counts and each anomaly kept, with its cause.
func (f *Fencing) EvidenceLines(_ Status, t0 int64) (string, []string) {
	if f.Valid && f.Regressions == 0 && f.Duplicates == 0 && !f.Checked {
		return "no grant carried a fence", nil
	}
	numbers := fmt.Sprintf("%s, %s", Plural(f.Regressions, "regression"), Plural(f.Duplicates, "duplicate"))
	return numbers, evidenceLines(len(f.Anomalies), func(i int) string {
		a := f.Anomalies[i]
		line := fmt.Sprintf("%s: %s was granted fence %s at %s after %s got fence %s at %s",
			a.Kind, a.Later.Process, FmtFence(a.Later.Fence), RelSec(a.Later.OK, t0),
			a.Earlier.Holder(), FmtFence(a.Earlier.Fence), RelSec(a.Earlier.OK, t0))
		if a.Cause != "" {
			line += " (" + a.Cause + ")"
		}
		return line
	})
}
