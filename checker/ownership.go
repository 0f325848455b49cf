package checker

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/lockcheck/lockcheck/history"
)

// beliefEdge is the start or the end of one belief interval.
type beliefEdge struct {
	at      int64
	end     bool
	process history.Process
}

// ownershipWindows finds the windows in which several processes believed
// they held k's key, among k's grants, with the writes invoked inside each
// by its processes, calling found with each in time order. Belief
// intervals [OK, BeliefEnd] are swept as start and end events, ends before
// starts at the same instant, so a hand-over at one instant is no overlap.
// A window opens when a second process starts believing and lasts, merged,
// while the key is never free: a paused holder overlapped by one grant
// after another is one window, not one per grant. It ends at the last
// moment at which two processes believed. In a working lock no window
// opens. The scan settles a key in stretches between which nobody believes
// (settle), so no window spans two stretches.
func ownershipWindows(k *keyFacts, outcomes *outcomes, found func(Window)) {
	writes := slices.Clone(k.writes)
	slices.SortFunc(writes, func(a, b writeOp) int { return cmp.Compare(a.invoke, b.invoke) })
	for _, w := range mergedWindows(k) {
		w.Ms = float64(w.End-w.Start) / 1e6
		first := sort.Search(len(writes), func(i int) bool { return writes[i].invoke >= w.Start })
		for _, wr := range writes[first:] {
			if wr.invoke > w.End {
				break
			}
			if _, in := slices.BinarySearch(w.Processes, wr.process); !in {
				continue
			}
			w.Writes = append(w.Writes, wr.index)
			if outcomes.of(&wr).accepted == accepted {
				w.Unsafe++
			}
		}
		found(w)
	}
}

// doubleOwnership gathers the keys' windows, in key order, naming the
// faults in force during each. Writes on a key no acquire names are tied
// to no lock (a history that names the resource, not the lock).
func doubleOwnership(keys []*keyFacts, faults []Fault) DoubleOwnership {
	var res DoubleOwnership
	for _, k := range keys {
		if !k.settled.attempted {
			res.UntiedWrites += k.settled.writes
			continue
		}
		o := &k.settled.ownership
		res.Windows += o.Windows
		res.TotalMs += o.TotalMs
		res.MaxMs = max(res.MaxMs, o.MaxMs)
		res.UnsafeWrites += o.UnsafeWrites
		for _, w := range o.List {
			if len(res.List) < maxEvidence {
				w.Faults = faultNames(faultsDuring(faults, w.Start, w.End))
				res.List = append(res.List, w)
			}
		}
		res.letGo = append(res.letGo, o.letGo...)
	}
	if res.UntiedWrites > 0 {
		res.State = StateUnknown
		res.StateReason = fmt.Sprintf("%s on keys no acquire names; a read or write is tied to the lock of its own key", count(res.UntiedWrites, "write is", "writes are"))
	}
	return res
}

// letGo is a lease with a TTL that the service certainly let go during a
// double-ownership window, because its holder was paused past it: the
// holder believed on, the service did not (faultCover.pausedEnd).
type letGo struct {
	key     string
	start   int64 // the window's
	process history.Process
	at      int64
}

// lettingGo finds, among grants, the leases with a TTL of w's processes,
// believed during w, that the service let go during it.
func lettingGo(grants []Grant, w Window, cover faultCover) []letGo {
	var out []letGo
	for _, g := range grants {
		if g.TTLms <= 0 || g.OK >= w.End || g.BeliefEnd <= w.Start || !w.has(g.Process) {
			continue
		}
		if at, _, found := cover.pausedEnd(g.Process, g.OK, g.BeliefEnd, g.TTLms); found && at < w.End {
			out = append(out, letGo{key: w.Key, start: w.Start, process: g.Process, at: at})
		}
	}
	return out
}

// letGoAt is when the service let go of p's lease during w, if it did.
func (d *DoubleOwnership) letGoAt(w Window, p history.Process) (int64, bool) {
	for _, l := range d.letGo {
		if l.key == w.Key && l.start == w.Start && l.process == p {
			return l.at, true
		}
	}
	return 0, false
}

// mergedWindows sweeps k's belief intervals and returns its windows in time
// order, with Key, Start, End and Processes (sorted, distinct) set.
func mergedWindows(k *keyFacts) []Window {
	edges := make([]beliefEdge, 0, 2*len(k.grants))
	for _, g := range k.grants {
		if g.BeliefEnd > g.OK { // an empty belief overlaps nothing
			edges = append(edges, beliefEdge{at: g.OK, process: g.Process}, beliefEdge{at: g.BeliefEnd, end: true, process: g.Process})
		}
	}
	slices.SortFunc(edges, func(a, b beliefEdge) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		if a.end != b.end {
			if a.end {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.process, b.process)
	})
	var (
		windows   []Window
		believing = map[history.Process]int{} // open belief intervals per process
		open      bool
		w         Window
		in        map[history.Process]bool // processes of the open window
		lastTwo   int64                    // when the open window last had two believers
	)
	for _, e := range edges {
		if !e.end {
			believing[e.process]++
			switch {
			case open:
				in[e.process] = true
			case len(believing) >= 2:
				open, w, in = true, Window{Key: k.key, Start: e.at}, map[history.Process]bool{}
				for p := range believing {
					in[p] = true
				}
			}
			continue
		}
		before := len(believing)
		if believing[e.process]--; believing[e.process] <= 0 {
			delete(believing, e.process)
		}
		if !open {
			continue
		}
		if before >= 2 && len(believing) < 2 {
			lastTwo = e.at
		}
		if len(believing) == 0 {
			w.End = lastTwo
			for p := range in {
				w.Processes = append(w.Processes, p)
			}
			slices.Sort(w.Processes)
			windows = append(windows, w)
			open = false
		}
	}
	return windows
}

// DoubleOwnership: windows in which several processes believed they held
// the same key, merged per episode.
type DoubleOwnership struct {
	Windows      int      `json:"windows"`
	TotalMs      float64  `json:"total_ms"`
	MaxMs        float64  `json:"max_ms"`
	UnsafeWrites int      `json:"unsafe_writes"` // accepted writes by a window's processes inside it
	List         []Window `json:"list,omitempty"`
	// UntiedWrites are writes on a key that no acquire names: the model
	// ties a read or write to the lock of its key, so nobody held a lock
	// over them and they cannot be judged (the check is then unknown).
	UntiedWrites int `json:"untied_writes,omitempty"`
	Applicability
	// letGo are the leases the service let go during the windows of List
	// while their holders, paused, believed on: for the reason.
	letGo []letGo
}

// Window is a maximal span in which at least two processes believed they
// held Key, merged while the key was never free: from the first moment two
// believed to the last. A paused holder overlapped by grant after grant is
// one window.
type Window struct {
	Key       string            `json:"key"`
	Start     int64             `json:"start"`
	End       int64             `json:"end"`
	Ms        float64           `json:"ms"`
	Processes []history.Process `json:"processes"` // every process that believed during the window, sorted
	Faults    []string          `json:"faults,omitempty"`
	Writes    []int64           `json:"writes,omitempty"` // history indices of writes invoked inside the window by its processes
	Unsafe    int               `json:"unsafe"`           // how many of those the resource accepted
}

// Judge applies the verdict's rule: overlapping beliefs are always
// reported, but they are a failure only when the workload writes without a
// fence and the resource accepted writes inside a window.
//
// Writes the history does not tie to a lock (Applicability unknown) leave
// an unfenced run's double ownership unknown: the check cannot say whether
// they landed inside an overlap.
func (d *DoubleOwnership) Judge(c JudgeContext) Judgement {
	switch {
	case !c.Fenced && d.UnsafeWrites > 0:
		return Judgement{StatusFailed, fmt.Sprintf("Two clients believed they held the lock at the same time and the resource, which checks no fence, accepted %s from them.", Plural(d.UnsafeWrites, "write"))}
	case !c.Fenced && d.State == StateUnknown:
		return Judgement{StatusUnknown, "Double ownership could not be judged: " + d.StateReason}
	case d.Windows == 0:
		return Judgement{Status: StatusOK}
	case c.Fenced:
		return Judgement{StatusNotice, "Two clients believed they held the lock at the same time; the fenced resource is what keeps this safe."}
	}
	return Judgement{StatusNotice, "Two clients believed they held the lock at the same time, but neither wrote inside the overlap."}
}

func (d *DoubleOwnership) conclude(c *conclusion) { *d = doubleOwnership(c.keys, c.faults) }

// AnomalyCount counts the writes that landed inside a window.
func (d *DoubleOwnership) AnomalyCount() int { return d.UnsafeWrites }

// AnomalyTimes are the starts of the windows whose writes landed.
func (d *DoubleOwnership) AnomalyTimes(note func(int64)) {
	for _, w := range d.List {
		if w.Unsafe > 0 {
			note(w.Start)
		}
	}
}

// EvidenceLines are the windows' count, length and landed writes, and each
// window kept.
func (d *DoubleOwnership) EvidenceLines(_ Status, t0 int64) (string, []string) {
	if d.Windows == 0 {
		return "0 windows", nil
	}
	numbers := fmt.Sprintf("%s, %s ms total, max %s ms, %s", Plural(d.Windows, "window"),
		FmtMs(d.TotalMs), FmtMs(d.MaxMs), Plural(d.UnsafeWrites, "unsafe write"))
	return numbers, evidenceLines(len(d.List), func(i int) string {
		w := d.List[i]
		return fmt.Sprintf("key %q: %s the lock from %s for %s ms, %s accepted; faults: %s",
			w.Key, BelievedHeld(w.Processes), RelSec(w.Start, t0), FmtMs(w.Ms),
			Plural(w.Unsafe, "write"), OrNone(w.Faults))
	})
}
