package checker

import (
	"errors"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/lockcheck/lockcheck/history"
)

// Follower checks a run's history and resource log while they are written.
// Each Read takes only the lines added since the last (a line still being
// written waits), carrying the scan from one Read to the next, and the
// scan settles each key whenever it is at rest (settle.go): Anomalies
// reports what the settled stretches show. It is the checker of lockcheck
// check, read in pieces; the verdict of a run is still the check of the
// whole history.
type Follower struct {
	history                   *history.Tail
	resource                  *history.Tail // nil for a run with no resource log
	lines                     *history.EventLines
	resourceLines             *history.ResourceLines
	opts                      Options
	s                         *scanner
	entries                   []history.ResourceEntry // read from the resource log, not yet taken by the scan
	historyPath, resourcePath string
	// slack is how far the scan reads past a point of rest before it
	// settles there; doubled each time the history went back past one.
	slack int64
}

// NewFollower follows the history at historyPath and the resource log at
// resourcePath (a run with none when it does not exist yet).
func NewFollower(historyPath, resourcePath string, opts Options) (*Follower, error) {
	f := &Follower{historyPath: historyPath, resourcePath: resourcePath, opts: opts.withDefaults(), slack: settleSlack}
	return f, f.open()
}

func (f *Follower) open() error {
	h, err := history.OpenTail(f.historyPath, false)
	if err != nil {
		return err
	}
	f.history, f.s, f.entries = h, nil, nil
	f.resource, err = history.OpenTail(f.resourcePath, true)
	if errors.Is(err, fs.ErrNotExist) {
		f.resource, err = nil, nil
	}
	if err != nil {
		h.Close()
		return err
	}
	var source resourceSource
	f.resourceLines = history.NewResourceLines(func(e *history.ResourceEntry) error {
		f.entries = append(f.entries, *e)
		return nil
	})
	if f.resource != nil {
		source = func() (*history.ResourceEntry, error) {
			if len(f.entries) == 0 {
				return nil, nil
			}
			e := &f.entries[0]
			f.entries = f.entries[1:]
			return e, nil
		}
	}
	f.lines = history.NewEventLines(func(hd history.Header) error {
		f.s = newScanner(hd, f.opts, source)
		f.s.settleAt, f.s.slack, f.s.following = 1, f.slack, true
		if f.slack > maxFollowSlack {
			f.s.settleAt = 0 // a history this far out of order is only checked at its end
		}
		return nil
	}, func(e *history.Event) error {
		f.s.event(e)
		return nil
	})
	return nil
}

// maxFollowSlack bounds the follower's slack.
const maxFollowSlack = int64(10e9)

// Read takes the lines written since the last Read. A history the model
// refuses is an error; one that went back past a settled stretch is read
// again from its start, with twice the slack.
func (f *Follower) Read() error {
	// The history's new lines first, then the resource log's: a write's
	// entry is logged before its client records the ok, so every entry
	// of a write read is there.
	type line struct {
		n int
		b []byte
	}
	var lines []line
	err := f.history.Lines(func(n int, b []byte) error {
		lines = append(lines, line{n, slices.Clone(b)})
		return nil
	})
	if err != nil {
		return err
	}
	if f.resource != nil {
		if err := f.resource.Lines(f.resourceLines.Line); err != nil {
			return err
		}
	}
	for _, l := range lines {
		if err := f.lines.Line(l.n, l.b); err != nil {
			return &history.ParseError{Line: l.n, Err: err}
		}
	}
	if f.s != nil && f.s.reordered {
		f.slack *= 2
		f.Close()
		if err := f.open(); err != nil {
			return err
		}
		return f.Read()
	}
	return nil
}

// Anomalies counts the anomalies of each check that failed on the stretches
// settled so far, as AnomaliesByCheck does; fenced says whether the
// workload's resource checks fences.
func (f *Follower) Anomalies(fenced bool) []CheckAnomalies {
	if f.s == nil {
		return nil
	}
	return AnomaliesByCheck(f.s.settledResult(), fenced)
}

// Close closes the files.
func (f *Follower) Close() {
	f.history.Close()
	if f.resource != nil {
		f.resource.Close()
	}
}

// settledResult is what the checks found on the settled stretches.
func (s *scanner) settledResult() *Result {
	keys := slices.SortedFunc(maps.Values(s.keys), func(a, b *keyFacts) int { return strings.Compare(a.key, b.key) })
	faults := collectFaults(s.facts.nemesis, s.facts.span.End)
	r := &Result{Span: s.facts.span, Faults: faults}
	r.Checks.concludeAll(&conclusion{s: s, keys: keys, faults: faults, span: s.facts.span, settled: true})
	return r
}
