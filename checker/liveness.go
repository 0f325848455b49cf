package checker

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/lockcheck/lockcheck/history"
)

// killLead is how long before a stall a kill at a failpoint still explains
// it: the stall starts at the previous grant, the kill lands during the
// victim's acquire.
const killLead = 1e9

// failpointWords says in words where a known failpoint sits and what a kill
// there leaves behind.
var failpointWords = map[string]struct{ where, leaves string }{
	"setnx-expire-gap": {"between SETNX and EXPIRE", "the lock key was left with no TTL"},
}

// checkLiveness measures how the lock served its clients: grants, acquire
// latency, the longest stretch with no grant on a key while some acquire
// on it was in flight, and the stretches in which a key was orphaned (each
// key's stalls and orphans were found as it was settled).
func checkLiveness(f *facts, latencies []int64) Liveness {
	res := Liveness{AcquireFailed: f.acquireFailed, AcquireRefused: f.acquireRefused, AcquireNotSent: f.acquireNotSent, AcquireUnknown: f.acquireUnknown,
		AcquireAttempts: f.acquireAttempts, Grants: len(latencies),
		AcquireNoFault: f.quiet.n, AcquireNoFaultUnanswered: f.quiet.unanswered, AcquireErrors: errorsOf(&f.quiet, f.span.Start)}
	if secs := float64(f.span.End-f.span.Start) / 1e9; secs > 0 {
		res.GrantsPerSec = float64(res.Grants) / secs
	}
	if len(latencies) > 0 {
		slices.Sort(latencies)
		res.AcquireP50Ms = ms(percentile(latencies, 0.50))
		res.AcquireP99Ms = ms(percentile(latencies, 0.99))
		res.AcquireMaxMs = ms(latencies[len(latencies)-1])
	}
	var stalled *keyFacts
	for _, k := range f.keys {
		st := &k.settled.stalls
		if st.found && ms(st.longest.End-st.longest.Start) > res.LongestStallMs {
			stall := st.longest
			res.LongestStallMs = ms(stall.End - stall.Start)
			res.Stall, res.StallKey = &stall, k.key
			stalled = k
		}
		o := &k.settled.orphans
		res.Orphaned += o.count
		for _, found := range o.found {
			if len(res.Orphans) < maxEvidence {
				found.Reason = orphanReason(f, found)
				res.Orphans = append(res.Orphans, found.Orphan)
			}
			res.StuckUntilEnd = res.StuckUntilEnd || found.UntilEnd
		}
	}
	if res.Stall != nil {
		// The longest stall is the lock stuck for good when an orphaned
		// stretch of its key ran to the end of the run with it.
		stuck := slices.ContainsFunc(res.Orphans, func(o Orphan) bool {
			return o.UntilEnd && o.Key == stalled.key && o.To == res.Stall.End
		})
		res.StallReason = stallReason(f, stalled.key, stalled.settled.stalls.holder, *res.Stall, stuck)
	}
	return res
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []int64, p float64) int64 {
	rank := int(math.Ceil(p * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// Liveness: how the lock served its clients.
type Liveness struct {
	Grants         int     `json:"grants"`
	GrantsPerSec   float64 `json:"grants_per_sec"`
	LongestStallMs float64 `json:"longest_stall_ms"`
	// Stall is the longest stretch with no grant while clients were trying.
	Stall *Interval `json:"stall,omitempty"`
	// StuckUntilEnd is set when a key was orphaned until the end of the
	// run: nobody held it and every client that asked was refused.
	StuckUntilEnd   bool    `json:"stuck_until_end"`
	StallReason     string  `json:"stall_reason,omitempty"`
	StallKey        string  `json:"stall_key,omitempty"` // the key nobody got during the stall
	AcquireP50Ms    float64 `json:"acquire_p50_ms"`
	AcquireP99Ms    float64 `json:"acquire_p99_ms"`
	AcquireMaxMs    float64 `json:"acquire_max_ms"`
	AcquireAttempts int     `json:"acquire_attempts"`
	AcquireFailed   int     `json:"acquire_failed"`  // the lock was busy
	AcquireRefused  int     `json:"acquire_refused"` // the service would not write at all (NOREPLICAS, READONLY)
	// AcquireNotSent counts the acquires the client refused itself,
	// sending nothing to the service (a program's error 41: not
	// connected); the service refused none of them.
	AcquireNotSent int `json:"acquire_not_sent"`
	AcquireUnknown int `json:"acquire_unknown"`
	// AcquireNoFault counts the acquires made while no fault on a node, or
	// on their own client, was in force, and AcquireNoFaultUnanswered those
	// of them that ended in an error or an unknown outcome; more than half
	// makes a run's verdict unknown (runstate.go).
	AcquireNoFault           int `json:"acquire_no_fault"`
	AcquireNoFaultUnanswered int `json:"acquire_no_fault_unanswered"`
	// AcquireErrors are the commonest errors of those, by kind.
	AcquireErrors []AcquireError `json:"acquire_errors,omitempty"`
	// Orphaned counts the stretches in which a key was orphaned: nobody
	// held it, yet the service refused every client that asked, for
	// longer than the orphan bound (docs/history.md, "Orphaned locks").
	Orphaned int `json:"orphaned"`
	// Orphans are the first maxEvidence of them.
	Orphans []Orphan `json:"orphans,omitempty"`
}

// Orphan is one stretch in which a key was orphaned.
type Orphan struct {
	Key string `json:"key"`
	// From is when the last claim on the key before it ended (the
	// history's start when there was none), To when the next one began,
	// or the end of the run (UntilEnd).
	From     int64 `json:"from"`
	To       int64 `json:"to"`
	UntilEnd bool  `json:"until_end"`
	// FirstRefused is the answer of the first acquire refused in it,
	// LastRefused the invoke of the last, Refused how many were.
	FirstRefused int64 `json:"first_refused"`
	LastRefused  int64 `json:"last_refused"`
	Refused      int   `json:"refused"`
	// BoundMs is the orphan bound it outlasted: twice the TTL and a
	// second.
	BoundMs float64 `json:"bound_ms"`
	// Holder is the process of the last claim before it, if any.
	Holder *history.Process `json:"holder,omitempty"`
	// Reason says in words what held the key and since when.
	Reason string `json:"reason"`
}

// Judge fails liveness when a key was orphaned: a lock that nobody holds
// and nobody can take is broken, as surely as one granted twice.
func (l *Liveness) Judge(JudgeContext) Judgement {
	if l.Orphaned == 0 {
		return Judgement{Status: StatusOK}
	}
	msg := "The lock was orphaned"
	if len(l.Orphans) > 0 {
		msg += ": " + l.Orphans[0].Reason
	}
	if l.Orphaned > 1 {
		msg += fmt.Sprintf(" (%d orphaned stretches in all)", l.Orphaned)
	}
	return Judgement{StatusFailed, strings.TrimSuffix(msg, ".") + "."}
}

// conclude judges liveness over the whole history; the settled stretches
// alone say nothing of it.
func (l *Liveness) conclude(c *conclusion) {
	if !c.settled {
		*l = checkLiveness(c.f, c.s.latencies)
	}
}

// AnomalyCount counts the orphaned stretches.
func (l *Liveness) AnomalyCount() int { return l.Orphaned }

// AnomalyTimes are the first refusals of the orphaned stretches kept,
// while nobody held the key.
func (l *Liveness) AnomalyTimes(note func(int64)) {
	for _, o := range l.Orphans {
		note(o.FirstRefused)
	}
}

// EvidenceLines are the grant rate, the longest stall, the acquire latency, the
// refusals and orphaned stretches, then each orphan kept and the stall.
func (l *Liveness) EvidenceLines(_ Status, t0 int64) (string, []string) {
	numbers := fmt.Sprintf("%s (%.1f/s), longest stall %s ms, acquire p50 %s ms, p99 %s ms",
		Plural(l.Grants, "grant"), l.GrantsPerSec, FmtMs(l.LongestStallMs), FmtMs(l.AcquireP50Ms), FmtMs(l.AcquireP99Ms))
	if l.AcquireRefused > 0 {
		// A mitigation at work (min-replicas-to-write) shows as refusals.
		numbers += fmt.Sprintf(", %s refused by the service", Plural(l.AcquireRefused, "acquire"))
	}
	if l.AcquireNotSent > 0 {
		numbers += fmt.Sprintf(", %s not sent by the client (not connected)", Plural(l.AcquireNotSent, "acquire"))
	}
	if l.Orphaned > 0 {
		numbers += fmt.Sprintf(", orphaned %s", Plural(l.Orphaned, "time"))
		if l.StuckUntilEnd {
			numbers += " (until the end of the run)"
		}
	}
	details := evidenceLines(len(l.Orphans), func(i int) string {
		o := l.Orphans[i]
		until := "to " + RelSec(o.To, t0)
		if o.UntilEnd {
			until = "to the end of the run"
		}
		return fmt.Sprintf("key %q orphaned from %s %s: %s refused while nobody held it, over longer than the %s ms bound; %s",
			o.Key, RelSec(o.From, t0), until, Plural(o.Refused, "acquire"), FmtMs(o.BoundMs), o.Reason)
	})
	if l.Stall != nil {
		details = append(details, fmt.Sprintf("longest stall from %s to %s", RelSec(l.Stall.Start, t0), RelSec(l.Stall.End, t0)))
	}
	if l.StallReason != "" {
		details = append(details, l.StallReason)
	}
	return numbers, details
}
