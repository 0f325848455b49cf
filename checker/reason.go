package checker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockcheck/lockcheck/history"
)

// maxReasonParts keeps the verdict to one readable sentence.
const maxReasonParts = 3

// explain says the verdict in one plain sentence built from the evidence,
// with times relative to the start of the history.
func explain(r *Result, fenced bool) string {
	x := explainer{r: r, fenced: fenced}
	switch r.Valid {
	case Invalid:
		parts := x.anomalies()
		if story := x.sessionPhrase(); story != "" {
			// The pooler's story is the cause of what broke: it follows
			// the first anomaly and comes before the rest.
			parts = slices.Insert(parts, min(1, len(parts)), story)
		}
		return sentence(parts)
	case Unknown:
		// The checks that could not decide say why; when none did, the
		// run's own reasons carry the sentence (withRunReasons).
		var why []string
		for _, c := range r.Checks.List() {
			if j := c.Check.Judge(JudgeContext{Fenced: fenced, T0: r.Span.Start}); j.Status == StatusUnknown {
				why = append(why, strings.TrimSuffix(j.Message, "."))
			}
		}
		if len(why) == 0 {
			// The run's own reasons carry the sentence; a pooler's story
			// still says what the service was left holding.
			if story := x.sessionPhrase(); story != "" {
				return sentence([]string{story})
			}
			return ""
		}
		return "No safety check failed, but " + lowerFirst(strings.Join(why, "; ")) + "."
	}
	parts := []string{x.noAnomaly()}
	if story := x.sessionPhrase(); story != "" {
		parts = append(parts, story)
	}
	return sentence(parts)
}

func sentence(parts []string) string {
	if len(parts) > maxReasonParts {
		parts = parts[:maxReasonParts]
	}
	return strings.Join(parts, "; ") + "."
}

// relSeconds formats a time relative to the start of the history: "4.20s".
func relSeconds(ns int64) string { return relSecondsDigits(ns, 2) }

func relSecondsDigits(ns int64, digits int) string {
	return fmt.Sprintf("%.*fs", digits, float64(ns)/1e9)
}

// relSecondsApart formats two times relative to the start of the history,
// with as many decimals as it takes (two to nine) for times that differ to
// read differently: "1.00s" and "1.000000001s", never "1.00s" twice.
func relSecondsApart(a, b int64) (string, string) {
	for digits := 2; ; digits++ {
		sa, sb := relSecondsDigits(a, digits), relSecondsDigits(b, digits)
		if sa != sb || a == b || digits == 9 {
			return sa, sb
		}
	}
}

// lasting formats a duration: "612 ms" or "15.8s".
func lasting(ns int64) string {
	if ns < 1e9 {
		return fmt.Sprintf("%d ms", (ns+5e5)/1e6)
	}
	return fmt.Sprintf("%.1fs", float64(ns)/1e9)
}

type explainer struct {
	r      *Result
	fenced bool
}

func (x explainer) at(t int64) string { return relSeconds(t - x.r.Span.Start) }

// anomalies describes what broke, causes before their effects.
func (x explainer) anomalies() []string {
	c := &x.r.Checks
	var parts []string
	if ev := c.LeaseSafety.Evidence; len(ev) > 0 {
		parts = append(parts, x.leaseViolation(ev[0]))
	}
	harm := x.harm()
	if w := x.window(harm, c.LeaseSafety.Evidence); w != nil {
		parts = append(parts, x.doubleOwnership(*w))
	}
	if an := c.Fencing.Anomalies; len(an) > 0 {
		parts = append(parts, x.fenceAnomaly(an[0]))
	}
	if harm != nil {
		parts = append(parts, x.resourceAnomaly(*harm))
	}
	// A lost update or stale write already is the non-linearizable step,
	// told in the resource's words.
	if l := c.Linearizability; l.Result == NotLinearizable && harm == nil {
		parts = append(parts, "the read-modify-write history is not linearizable: "+l.Detail)
	}
	if o := c.Liveness.Orphans; len(o) > 0 {
		s := "the lock was orphaned: " + o[0].Reason
		if len(parts) == 0 {
			s = "The" + strings.TrimPrefix(s, "the")
		}
		parts = append(parts, s)
	}
	return parts
}

func (x explainer) leaseViolation(v LeaseViolation) string {
	granted, until := relSecondsApart(v.Later.OK-x.r.Span.Start, v.Earlier.CertainEnd-x.r.Span.Start)
	s := fmt.Sprintf("%s was granted %s%s at %s while %s's lease%s was certainly live",
		v.Later.Process, v.Key, onNodes(v.Later.Nodes), granted, v.Earlier.Process, onNodes(v.Earlier.Nodes))
	if v.Earlier.CertainEnd <= x.r.Span.End {
		s += " until " + until
	}
	if v.Later.Session != "" && v.Later.Session == v.Earlier.Session {
		// A session lock is re-entrant: a pooler that hands the holder's
		// server connection to another client hands it the lock too.
		s += fmt.Sprintf(", both on server session %s", v.Later.Session)
	}
	if f := leaseFault(faultsDuring(x.r.Faults, v.Earlier.OK, v.Later.OK), v); f != nil {
		s += " (" + faultPhraseAt(*f, v.Later.OK) + ")"
	}
	return s
}

// faultPhraseAt says what a fault did as of the moment at: a fault that
// lasts (a pause, a partition) is "while" only when it was in force at that
// moment; one that had healed before is "N after the pause of c3 healed".
func faultPhraseAt(f Fault, at int64) string {
	lasts := f.Kind == history.NemPause || f.Kind == history.NemPartition
	if lasts && f.End > f.Start && f.End < at {
		return fmt.Sprintf("%s after the %s of %s healed", lasting(at-f.End), f.Kind, f.Target)
	}
	return faultPhrase(f)
}

// onNodes names the nodes a multi-node lock was won on: " on redlock-1,
// redlock-2 and redlock-3", or nothing.
func onNodes(nodes []string) string {
	if len(nodes) == 0 {
		return ""
	}
	return " on " + JoinAnd(nodes)
}

// harm is the first write the resource should not have taken: a lost update
// or an accepted stale write.
func (x explainer) harm() *ResourceAnomaly {
	for i, a := range x.r.Checks.Resource.Anomalies {
		if a.Kind != StaleWriteRefused {
			return &x.r.Checks.Resource.Anomalies[i]
		}
	}
	return nil
}

// window picks the double-ownership window that explains harm (the latest
// one on its key that began before it), else one that contains both
// processes of the first lease violation (preferring one that contains its
// grant), else the one with the most writes that landed, else the longest.
func (x explainer) window(harm *ResourceAnomaly, violations []LeaseViolation) *Window {
	var best *Window
	for i := range x.r.Checks.DoubleOwnership.List {
		w := &x.r.Checks.DoubleOwnership.List[i]
		switch {
		case harm != nil:
			if w.Key == harm.Key && w.Start <= harm.Time && (best == nil || w.Start > best.Start) {
				best = w
			}
		case len(violations) > 0:
			v := violations[0]
			if w.Key != v.Key || !w.has(v.Earlier.Process) || !w.has(v.Later.Process) {
				continue
			}
			if best == nil || (!best.spans(v.Later.OK) && w.spans(v.Later.OK)) {
				best = w
			}
		case best == nil || w.Unsafe > best.Unsafe || (w.Unsafe == best.Unsafe && w.Ms > best.Ms):
			best = w
		}
	}
	return best
}

// has tells whether p believed during w.
func (w *Window) has(p history.Process) bool {
	_, ok := slices.BinarySearch(w.Processes, p)
	return ok
}

// spans tells whether t lies within w.
func (w *Window) spans(t int64) bool { return w.Start <= t && t <= w.End }

// doubleOwnership describes a window. When one of its processes was paused
// throughout it, the story is that holder's: "c0 held lock-0 through a
// 1000 ms pause while c1, c3 and c4 were granted it: two clients believed
// they held it for 512 ms", or, when the service let its lease with a TTL
// go during the pause, "c0 believed it held lock-0 through a 1000 ms pause;
// the service had let its lease go by 0.40s, and c1, c3 and c4 were granted
// it: ...". Otherwise it names the processes and the fault
// that explains the window best.
func (x explainer) doubleOwnership(w Window) string {
	var s string
	fs := faultsDuring(x.r.Faults, w.Start, w.End)
	var pause, own *Fault
	for i, f := range fs {
		if !w.hasTarget(f.Target) {
			continue
		}
		// A pause that spans the whole window is the holder's that every
		// other process was granted the lock around.
		if f.Kind == history.NemPause && f.Start <= w.Start && f.End >= w.End && pause == nil {
			pause = &fs[i]
		}
		if own == nil {
			own = &fs[i]
		}
	}
	switch {
	case pause != nil:
		var others []string
		for _, p := range w.Processes {
			if p.String() != pause.Target {
				others = append(others, p.String())
			}
		}
		were := "were"
		if len(others) == 1 {
			were = "was"
		}
		s = fmt.Sprintf("%s held %s through a %s pause while %s %s granted it: two clients believed they held it for %s",
			pause.Target, w.Key, lasting(pause.End-pause.Start), JoinAnd(others), were, lasting(w.End-w.Start))
		if p, ok := clientTarget(&history.Value{Target: pause.Target}); ok {
			if at, gone := x.r.Checks.DoubleOwnership.letGoAt(w, p); gone {
				s = fmt.Sprintf("%s believed it held %s through a %s pause; the service had let its lease go by %s, and %s %s granted it: two clients believed they held it for %s",
					pause.Target, w.Key, lasting(pause.End-pause.Start), x.at(at), JoinAnd(others), were, lasting(w.End-w.Start))
			}
		}
	default:
		if len(w.Processes) == 2 {
			s = fmt.Sprintf("%s and %s both held %s for %s", w.Processes[0], w.Processes[1], w.Key, lasting(w.End-w.Start))
		} else {
			s = fmt.Sprintf("%s held %s in overlapping turns: two clients believed they held it for %s",
				JoinAnd(ProcessNames(w.Processes)), w.Key, lasting(w.End-w.Start))
		}
		// A fault of one of the owners explains the window best.
		if own != nil {
			s += " " + faultPhrase(*own)
		} else if len(fs) > 0 {
			// A fault that made a node forget a key (a clock jump, a
			// restart) explains a window better than one that only delayed.
			f := fs[0]
			if i := slices.IndexFunc(fs, forgets); i >= 0 {
				f = fs[i]
			}
			s += " " + faultPhrase(f)
		}
	}
	if !x.fenced && w.Unsafe > 0 {
		s += fmt.Sprintf(", and the resource accepted %s of theirs without fencing", count(w.Unsafe, "write", "writes"))
	}
	return s
}

// hasTarget tells whether a fault target names one of w's processes.
func (w *Window) hasTarget(target string) bool {
	p, ok := clientTarget(&history.Value{Target: target})
	return ok && p.String() == target && w.has(p)
}

// ProcessNames names processes as the reports do (c3).
func ProcessNames(ps []history.Process) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.String()
	}
	return names
}

// JoinAnd lists words as a sentence does: "c1", "c1 and c3", "c1, c3 and c4".
func JoinAnd(words []string) string {
	if len(words) <= 1 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

func (x explainer) resourceAnomaly(a ResourceAnomaly) string {
	write := fmt.Sprintf("%s's write of %d", a.Process, a.Value)
	if a.Fence != nil {
		write = fmt.Sprintf("%s's write with fence %d", a.Process, *a.Fence)
	}
	if a.Kind == LostUpdate {
		return write + " overwrote a value it had not read (lost update)"
	}
	return fmt.Sprintf("the resource accepted %s after fence %d (stale write)", write, *a.Highest)
}

func (x explainer) fenceAnomaly(a FenceAnomaly) string {
	why := a.Kind
	if a.Cause != "" {
		why += ", " + a.Cause
	}
	if a.Earlier.Index < 0 {
		// The earlier grant is an earlier segment's of a soak.
		return fmt.Sprintf("%s got fence %d for %s at %s, though an earlier segment of the soak had handed out fence %d (%s)",
			a.Later.Process, *a.Later.Fence, a.Later.Key, x.at(a.Later.OK), *a.Earlier.Fence, why)
	}
	if a.Kind == FenceDuplicate {
		return fmt.Sprintf("fence %d of %s was handed to both %s and %s (%s)", *a.Later.Fence, a.Later.Key, a.Earlier.Process, a.Later.Process, why)
	}
	return fmt.Sprintf("%s got fence %d for %s at %s after %s had got fence %d (%s)",
		a.Later.Process, *a.Later.Fence, a.Later.Key, x.at(a.Later.OK), a.Earlier.Process, *a.Earlier.Fence, why)
}

// noAnomaly sums up a history that passed.
func (x explainer) noAnomaly() string {
	c := &x.r.Checks
	s := "No anomaly: " + count(c.Liveness.Grants, "grant", "grants")
	if c.Fencing.Checked {
		s += ", fences rose"
	} else {
		s += ", no lease was broken"
	}
	s += ", no write was lost"
	if d := c.DoubleOwnership; d.Windows > 0 {
		were := "were"
		if d.Windows == 1 {
			were = "was"
		}
		s += fmt.Sprintf("; %s (longest %s)", count(d.Windows, "double-ownership window", "double-ownership windows"), lasting(int64(d.MaxMs*1e6)))
		switch {
		case !x.fenced:
			s += " saw no write land"
		case c.Resource.StaleWritesRefused > 0:
			s += fmt.Sprintf(" %s contained by fencing, which refused %s", were, count(c.Resource.StaleWritesRefused, "stale write", "stale writes"))
		default:
			s += " " + were + " contained by fencing"
		}
	}
	return s
}

// count says "1 grant" or "3 grants".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// lowerFirst puts a sentence after "but": its first letter lower case.
func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
