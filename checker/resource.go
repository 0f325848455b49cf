package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/lockcheck/lockcheck/history"
)

// Sources of the resource check.
const (
	SourceResourceLog = "resource-log"
	SourceHistory     = "history"
)

// Kinds of resource anomalies.
const (
	LostUpdate         = "lost-update"
	StaleWriteAccepted = "stale-write-accepted"
	StaleWriteRefused  = "stale-write-refused"
)

// checkResource judges a resource log as the scan does (resourceCheck).
func checkResource(entries []history.ResourceEntry, source string) ResourceSafety {
	entries = sortedBySeq(entries)
	c := newResourceCheck(source)
	for i := range entries {
		c.add(&entries[i])
	}
	return c.result()
}

// resourceCheck judges the resource's serial log, fed in Seq order per
// key: an accepted write that was computed from a value other than the one
// it replaced lost an update; an accepted write whose fence is below the
// highest fence accepted before on that key is stale; a refused write is a
// stale write the resource stopped. It keeps the anomalies of the lowest
// Seq, maxEvidence of them.
type resourceCheck struct {
	res       ResourceSafety
	highest   map[string]int64
	anomalies []seqAnomaly
}

type seqAnomaly struct {
	seq int64
	ResourceAnomaly
}

func newResourceCheck(source string) *resourceCheck {
	return &resourceCheck{res: ResourceSafety{Source: source}, highest: map[string]int64{}}
}

func (c *resourceCheck) add(e *history.ResourceEntry) {
	high, seen := c.highest[e.Key]
	var kinds []string
	if e.Accepted && e.Read != e.Prev {
		c.res.LostUpdates++
		kinds = append(kinds, LostUpdate)
	}
	switch {
	case !e.Accepted:
		c.res.StaleWritesRefused++
		kinds = append(kinds, StaleWriteRefused)
	case e.Fence != nil && (!seen || *e.Fence > high):
		c.highest[e.Key] = *e.Fence
	case e.Fence != nil && *e.Fence < high:
		c.res.StaleWritesAccepted++
		kinds = append(kinds, StaleWriteAccepted)
	}
	for _, kind := range kinds {
		a := ResourceAnomaly{
			Kind: kind, Key: e.Key, Time: e.Time, Process: e.Process, Fence: e.Fence,
			Read: e.Read, Prev: e.Prev, Value: e.Value, Req: e.Req, Reason: e.Reason,
		}
		if seen {
			a.Highest = history.Int64(high)
		}
		c.anomalies = append(c.anomalies, seqAnomaly{e.Seq, a})
		if len(c.anomalies) >= 2*maxEvidence {
			c.trim()
		}
	}
}

// trim keeps the maxEvidence anomalies of the lowest Seq, in Seq order.
func (c *resourceCheck) trim() {
	slices.SortStableFunc(c.anomalies, func(a, b seqAnomaly) int { return cmp.Compare(a.seq, b.seq) })
	c.anomalies = c.anomalies[:min(len(c.anomalies), maxEvidence)]
}

func (c *resourceCheck) result() ResourceSafety {
	c.trim()
	res := c.res
	res.Anomalies = nil
	for _, a := range c.anomalies {
		res.Anomalies = append(res.Anomalies, a.ResourceAnomaly)
	}
	res.Valid = res.LostUpdates == 0 && res.StaleWritesAccepted == 0
	return res
}

func bySeq(a, b history.ResourceEntry) int { return cmp.Compare(a.Seq, b.Seq) }

// sortedBySeq is entries in Seq order, sorted in a copy when they are not.
func sortedBySeq(entries []history.ResourceEntry) []history.ResourceEntry {
	if !slices.IsSortedFunc(entries, bySeq) {
		entries = slices.Clone(entries)
		slices.SortStableFunc(entries, bySeq)
	}
	return entries
}

// entriesFromHistory stands in for a missing resource log: every write of
// k's stretch being settled that completed ok, in completion order, as the
// client saw it. unjudged counts the accepted ones a lost update cannot be
// judged on: no prev in the write's ok, or no value it was computed from.
func entriesFromHistory(k *keyFacts) (entries []history.ResourceEntry, unjudged int) {
	for i := range k.writes {
		w := &k.writes[i]
		if w.status != history.OK {
			continue
		}
		e := history.ResourceEntry{
			Seq: w.doneIndex, Time: w.done, Key: k.key, Process: w.process,
			Req: w.req, Fence: w.fence, Accepted: w.accepted == nil || *w.accepted,
		}
		switch {
		case w.read != nil:
			e.Read = *w.read
		case w.hasFrom:
			e.Read = w.from.value
		}
		if w.value != nil {
			e.Value = *w.value
		}
		// Without the value it replaced, or the value it was computed
		// from, a write cannot be judged lost.
		e.Prev = e.Read
		if w.prev != nil && (w.read != nil || w.hasFrom) {
			e.Prev = *w.prev
		} else if e.Accepted {
			unjudged++
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, bySeq)
	return entries, unjudged
}

// withUnjudged makes the resource check unknown when writes it should judge
// could not be: a lost update among them would go unseen.
func (r *ResourceSafety) withUnjudged(unjudged int) {
	r.Unjudged = unjudged
	if unjudged > 0 && r.State == "" {
		r.State = StateUnknown
		r.StateReason = fmt.Sprintf("%s accepted with no resource log and no prev (or no read) to judge a lost update by", count(unjudged, "write was", "writes were"))
	}
}

// withCompleteLog makes the resource check unknown when the resource log
// is not whole: its last line cut off, or fewer accepted entries than the
// history shows writes accepted (a write's entry is logged before its
// client hears it was accepted, so a complete log holds every one). The
// log is ground truth: a write missing from it is taken as never made, so
// the writes of a cut log's lost part would go unjudged, a lost update
// among them unseen.
func (r *ResourceSafety) withCompleteLog(s *scanner) {
	if !s.hasLog || r.State != "" {
		return
	}
	holds := fmt.Sprintf("%s; the history accepted %d", count(s.logAccepted, "accepted write", "accepted writes"), s.confirmed)
	switch {
	case s.logCut:
		r.State = StateUnknown
		r.StateReason = fmt.Sprintf("the resource log's last line is cut off (it holds %s): the writes after it are not in the log and cannot be judged; check the run's whole resource.jsonl", holds)
	case s.logAccepted < s.confirmed:
		r.State = StateUnknown
		r.StateReason = fmt.Sprintf("the resource log holds %s: %s from the log and cannot be judged; check the run's whole resource.jsonl", holds, count(s.confirmed-s.logAccepted, "is missing", "are missing"))
	}
}

// logKeys follows whether the resource log's entries name keys the
// history names: an entry is the write of the lock that protects it, under
// that lock's key (docs/history.md, "Reads and writes").
type logKeys struct {
	tied, untied int
	names        []string // the first few keys no event names
}

// maxUntiedNames bounds the keys the reason names.
const maxUntiedNames = 3

func (l *logKeys) note(key string, named bool) {
	if named {
		l.tied++
		return
	}
	l.untied++
	if len(l.names) < maxUntiedNames && !slices.Contains(l.names, key) {
		l.names = append(l.names, key)
	}
}

// withUntiedLog makes the resource check unknown when not one entry of the
// resource log names a key of the history (keys): the log was written
// under other names (the data's, "orders", where the history names the
// lock, "lock-0"), so no entry can be tied to a write of the history, and
// judging the log alone would vouch for writes the history never shows.
func (r *ResourceSafety) withUntiedLog(l logKeys, keys []*keyFacts) {
	if l.tied > 0 || l.untied == 0 || r.State != "" {
		return
	}
	var named []string
	for _, k := range keys {
		if len(named) == maxUntiedNames {
			break
		}
		named = append(named, strconv.Quote(k.key))
	}
	logNames := make([]string, len(l.names))
	for i, n := range l.names {
		logNames[i] = strconv.Quote(n)
	}
	history := "the history names no key"
	if len(named) > 0 {
		history = "the history names " + JoinAnd(named)
	}
	r.State = StateUnknown
	r.StateReason = fmt.Sprintf("none of the resource log's %s is on a key the history names (the log names %s, %s), so no entry can be tied to a write; log each write under the key of the lock that protects it",
		count(l.untied, "entry", "entries"), JoinAnd(logNames), history)
}

// outcome is what became of a write.
type outcome int

const (
	refused outcome = iota
	accepted
	unknownOutcome
)

// resolved is a write's outcome and the latest moment it took effect.
type resolved struct {
	accepted outcome
	at       int64
}

// outcomes resolves writes, preferring the resource log, which is ground
// truth, over what the client saw. The scan adds the log's entries up to
// the moment it settles, and drops those of the writes it settled.
type outcomes struct {
	byReq map[string]*history.ResourceEntry // nil without a resource log
}

func newOutcomes(resource []history.ResourceEntry) *outcomes {
	o := &outcomes{}
	if resource == nil {
		return o
	}
	o.byReq = make(map[string]*history.ResourceEntry, len(resource))
	for i := range resource {
		o.add(&resource[i])
	}
	return o
}

// add takes an entry of the resource log: the first accepted entry of a
// request stands.
func (o *outcomes) add(e *history.ResourceEntry) {
	if prev, ok := o.byReq[e.Req]; e.Req != "" && (!ok || !prev.Accepted) {
		o.byReq[e.Req] = e
	}
}

func (o *outcomes) of(w *writeOp) resolved {
	if e, ok := o.byReq[w.req]; ok && w.req != "" {
		if e.Accepted {
			return resolved{accepted, e.Time}
		}
		return resolved{refused, e.Time}
	}
	switch w.status {
	case history.OK:
		if w.accepted == nil || *w.accepted {
			return resolved{accepted, w.done}
		}
		return resolved{refused, w.done}
	case history.Fail:
		return resolved{refused, w.done}
	}
	if o.byReq == nil {
		return resolved{unknownOutcome, never}
	}
	// The resource log has every write that reached the resource; one
	// missing from it never happened.
	if w.status == history.Info {
		return resolved{refused, w.done}
	}
	return resolved{refused, w.invoke}
}

// ResourceSafety: was data corrupted, judged from the resource's serial log.
type ResourceSafety struct {
	Valid               bool              `json:"valid"`
	LostUpdates         int               `json:"lost_updates"`
	StaleWritesAccepted int               `json:"stale_writes_accepted"`
	StaleWritesRefused  int               `json:"stale_writes_refused"`
	Source              string            `json:"source"` // "resource-log" or "history"
	Anomalies           []ResourceAnomaly `json:"anomalies,omitempty"`
	// Unjudged are accepted writes that a lost update cannot be judged on:
	// with no resource log, a write ok that carries no prev, or a write
	// with no read before it and no read field (the check is then unknown).
	Unjudged int `json:"unjudged,omitempty"`
	Applicability
}

// ResourceAnomaly is one lost update or stale write.
type ResourceAnomaly struct {
	Kind    string          `json:"kind"` // lost-update, stale-write-accepted, stale-write-refused
	Key     string          `json:"key"`
	Time    int64           `json:"time"`
	Process history.Process `json:"process"`
	Fence   *int64          `json:"fence,omitempty"`
	Highest *int64          `json:"highest,omitempty"` // highest fence seen before, for stale writes
	Read    int64           `json:"read"`
	Prev    int64           `json:"prev"`
	Value   int64           `json:"value"`
	Req     string          `json:"req,omitempty"`
	Reason  string          `json:"reason,omitempty"` // why the resource refused the write
}

// Judge fails the resource on a lost update or an accepted stale write,
// and is unknown when writes could not be judged (no resource log and no
// prev on a write).
func (r *ResourceSafety) Judge(JudgeContext) Judgement {
	if r.Valid && r.LostUpdates == 0 && r.StaleWritesAccepted == 0 {
		if r.State == StateUnknown {
			return Judgement{StatusUnknown, "The resource check could not judge every write: " + r.StateReason}
		}
		return Judgement{Status: StatusOK}
	}
	return Judgement{StatusFailed, fmt.Sprintf("The protected resource was corrupted: %s and %s accepted.",
		Plural(r.LostUpdates, "lost update"), Plural(r.StaleWritesAccepted, "stale write"))}
}

// conclude takes the resource check's result, with the writes it could
// not judge and the log's keys no acquire names once the history is whole.
func (r *ResourceSafety) conclude(c *conclusion) {
	*r = c.s.resource.result()
	if !c.settled {
		r.withCompleteLog(c.s)
		r.withUnjudged(c.s.unjudged)
		r.withUntiedLog(c.s.logKeys, c.keys)
	}
}

// AnomalyCount counts the lost updates and accepted stale writes.
func (r *ResourceSafety) AnomalyCount() int { return r.LostUpdates + r.StaleWritesAccepted }

// AnomalyTimes are the times of the lost updates and accepted stale
// writes kept.
func (r *ResourceSafety) AnomalyTimes(note func(int64)) {
	for _, a := range r.Anomalies {
		if a.Kind == LostUpdate || a.Kind == StaleWriteAccepted {
			note(a.Time)
		}
	}
}

// EvidenceLines are the counts of each kind and, when the check failed, every
// anomaly kept but the refused stale writes (fencing doing its job).
func (r *ResourceSafety) EvidenceLines(status Status, t0 int64) (string, []string) {
	numbers := fmt.Sprintf("%s, %s accepted, %s refused", Plural(r.LostUpdates, "lost update"),
		Plural(r.StaleWritesAccepted, "stale write"), Plural(r.StaleWritesRefused, "stale write"))
	if r.Source == SourceHistory {
		numbers += ", judged from the history (no resource log)"
	}
	if status != StatusFailed {
		return numbers, nil
	}
	var bad []ResourceAnomaly
	for _, a := range r.Anomalies {
		if a.Kind != StaleWriteRefused {
			bad = append(bad, a)
		}
	}
	return numbers, evidenceLines(len(bad), func(i int) string {
		a := bad[i]
		return fmt.Sprintf("%s on key %q at %s by %s: read %d, resource held %d, wrote %d, fence %s (highest seen %s)",
			a.Kind, a.Key, RelSec(a.Time, t0), a.Process, a.Read, a.Prev, a.Value, FmtFence(a.Fence), FmtFence(a.Highest))
	})
}
