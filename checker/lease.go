package checker

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/lockcheck/lockcheck/history"
)

// maxEvidence bounds every evidence list; the counts stay exact.
const maxEvidence = 1000

// leaseViolations finds the grants among grants (one key's, in any order)
// made while another process's lease was certainly live, calling found with
// each pair in the order of the later grant's OK. A later grant B (by OK)
// violates an earlier grant A (another process, same key) when B was
// granted before A's lease can have ended (B.OK < A.CertainEnd) and,
// whatever order the two were granted in within their acquires, one lies
// inside the other's lease:
//
//   - B was asked for after A was granted (B.Invoke > A.OK; equal times
//     prove no order), so A was first and B lies inside A's lease, or
//   - A was granted before B's lease can have ended (A.OK < B.CertainEnd),
//     so had B been first, A would lie inside B's lease.
//
// With grants sorted by OK, both conditions on A select a prefix of the
// grants before B: those with OK < B.Invoke and those with
// OK < B.CertainEnd. The earlier grant of another process with the largest
// CertainEnd in the longer prefix decides; a prefix table of the best two
// grants of distinct processes answers that in O(log n).
//
// The scan settles a key's grants in stretches between which no lease is
// live (settle), so no violation spans two stretches.
func leaseViolations(grants []Grant, found func(earlier, later Grant)) {
	grants = slices.Clone(grants)
	slices.SortFunc(grants, func(a, b Grant) int {
		return cmp.Or(cmp.Compare(a.OK, b.OK), cmp.Compare(a.Invoke, b.Invoke), cmp.Compare(a.Index, b.Index))
	})
	// best[i] is the best two among grants[:i].
	best := make([]bestTwo, len(grants)+1)
	for i := range grants {
		best[i+1] = best[i]
		best[i+1].add(grants, i)
	}
	for i, b := range grants {
		candidates := best[i]
		if b.OK >= b.CertainEnd {
			settled := sort.Search(len(grants), func(j int) bool { return grants[j].OK >= b.Invoke })
			live := sort.Search(len(grants), func(j int) bool { return grants[j].OK >= b.CertainEnd })
			candidates = best[min(max(settled, live), i)]
		}
		if a, ok := candidates.other(grants, b.Process); ok && b.OK < a.CertainEnd {
			found(a, b)
		}
	}
}

// leaseSafety gathers the keys' violations, in key order, naming the
// faults in force during each.
func leaseSafety(keys []*keyFacts, faults []Fault) LeaseSafety {
	res := LeaseSafety{}
	for _, k := range keys {
		res.Violations += k.settled.leaseViolations
		for _, v := range k.settled.leaseEvidence {
			if len(res.Evidence) < maxEvidence {
				v.Faults = faultNames(faultsDuring(faults, v.Earlier.OK, v.Later.OK))
				res.Evidence = append(res.Evidence, v)
			}
		}
	}
	res.Valid = res.Violations == 0
	return res
}

// bestTwo holds the grant of largest CertainEnd and the grant of largest
// CertainEnd among the other processes, as indices plus one (0 is none).
type bestTwo struct{ first, second int }

func (t *bestTwo) add(grants []Grant, i int) {
	g := grants[i]
	switch {
	case t.first == 0 || g.CertainEnd > grants[t.first-1].CertainEnd:
		if t.first != 0 && grants[t.first-1].Process != g.Process {
			t.second = t.first
		}
		t.first = i + 1
	case g.Process != grants[t.first-1].Process && (t.second == 0 || g.CertainEnd > grants[t.second-1].CertainEnd):
		t.second = i + 1
	}
}

// other is the grant of largest CertainEnd not held by p.
func (t bestTwo) other(grants []Grant, p history.Process) (Grant, bool) {
	for _, i := range []int{t.first, t.second} {
		if i != 0 && grants[i-1].Process != p {
			return grants[i-1], true
		}
	}
	return Grant{}, false
}

// LeaseSafety: did the service grant a lock while another client's lease was
// certainly live and not released?
type LeaseSafety struct {
	Valid      bool             `json:"valid"`
	Violations int              `json:"violations"`
	Evidence   []LeaseViolation `json:"evidence,omitempty"`
	Applicability
}

// LeaseViolation is a grant to Later while Earlier's lease was certainly live.
type LeaseViolation struct {
	Key     string   `json:"key"`
	Earlier Grant    `json:"earlier"`
	Later   Grant    `json:"later"`
	Faults  []string `json:"faults,omitempty"` // faults in force or shortly before, as "pause c3"
}

// Judge fails lease safety on any grant made while another lease was
// certainly live.
func (l *LeaseSafety) Judge(JudgeContext) Judgement {
	if l.Valid && l.Violations == 0 {
		return Judgement{Status: StatusOK}
	}
	return Judgement{StatusFailed, fmt.Sprintf("The lock service granted the lock while another client's lease was certainly live and not released (%s).", Plural(l.Violations, "violation"))}
}

func (l *LeaseSafety) conclude(c *conclusion) { *l = leaseSafety(c.keys, c.faults) }

// AnomalyCount counts the violations.
func (l *LeaseSafety) AnomalyCount() int { return l.Violations }

// AnomalyTimes are the later grants of the violations kept.
func (l *LeaseSafety) AnomalyTimes(note func(int64)) {
	for _, v := range l.Evidence {
		note(v.Later.OK)
	}
}

// EvidenceLines are the violations and, for each kept, who was granted the lock
// over whose live lease.
func (l *LeaseSafety) EvidenceLines(_ Status, t0 int64) (string, []string) {
	return Plural(l.Violations, "violation"), evidenceLines(len(l.Evidence), func(i int) string {
		v := l.Evidence[i]
		return fmt.Sprintf("key %q: %s was granted at %s while %s's lease (granted at %s) was certainly live until %s; faults: %s",
			v.Key, v.Later.Process, RelSec(v.Later.OK, t0), v.Earlier.Process, RelSec(v.Earlier.OK, t0),
			RelSec(v.Earlier.CertainEnd, t0), OrNone(v.Faults))
	})
}
