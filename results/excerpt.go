package results

import (
	"errors"
	"os"
	"slices"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// A history file larger than excerptBytes (some 300,000 events) is not
// held in memory for its report: the checker reads it as it goes, and the
// report is drawn from an excerpt of it (history.Excerpt), so that checking
// an hours-long run takes the memory of a short one.
var excerptBytes int64 = 32 << 20

const (
	// maxExcerptWindows bounds the stretches around findings an excerpt
	// keeps, and maxWindowEvents the client events of each.
	maxExcerptWindows = 4
	maxWindowEvents   = 20_000
	// maxSampledOps bounds the operations sampled for latency figures.
	maxSampledOps = 20_000
)

// readExcerpt reads the history at path for the report of res: the
// header, every nemesis event, the client events around the first findings
// (padded by a few leases), and a sample of the operations.
func readExcerpt(path string, res *checker.Result) (*history.History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := &history.History{Excerpt: &history.Excerpt{Stride: 1}}
	var windows []checker.Interval
	kept := make([]int, maxExcerptWindows)
	invokes := map[history.Process]history.Event{}
	var ops opSampler
	keep := func(decode func() (*history.Event, error)) error {
		e, err := decode()
		if err == nil {
			h.Events = append(h.Events, *e)
		}
		return err
	}
	h.Truncated, err = history.Skim(f, func(hd history.Header) error {
		h.Header = hd
		windows = excerptWindows(res, hd.Config.TTLms)
		return nil
	}, func(head history.Head, decode func() (*history.Event, error)) error {
		h.Excerpt.Length++
		if head.Process == history.Nemesis {
			return keep(decode)
		}
		e := history.Event{Time: head.Time, Process: head.Process, Type: head.Type, F: head.F}
		if e.Type == history.Invoke {
			invokes[e.Process] = e
		} else if inv, ok := invokes[e.Process]; ok {
			delete(invokes, e.Process)
			ops.add(inv, e)
		}
		for i, w := range windows {
			if e.Time >= w.Start && e.Time <= w.End && kept[i] < maxWindowEvents {
				kept[i]++
				return keep(decode)
			}
		}
		return nil
	})
	if pe := (*history.ParseError)(nil); errors.As(err, &pe) {
		pe.File = path
	}
	if err != nil {
		return nil, err
	}
	h.Excerpt.Operations, h.Excerpt.Stride, h.Excerpt.Operated = ops.events, ops.stride, ops.seen
	return h, nil
}

// excerptWindows are the stretches of the history around what the checker
// found, earliest first, each padded by four leases (at least a second),
// merged where they overlap; the first few seconds when it found nothing.
func excerptWindows(res *checker.Result, ttlMs int64) []checker.Interval {
	var found []checker.Interval
	c := &res.Checks
	for _, v := range c.LeaseSafety.Evidence {
		found = append(found, checker.Interval{Start: v.Earlier.OK, End: v.Later.OK})
	}
	for _, w := range c.DoubleOwnership.List {
		found = append(found, checker.Interval{Start: w.Start, End: w.End})
	}
	for _, a := range c.Resource.Anomalies {
		found = append(found, checker.Interval{Start: a.Time, End: a.Time})
	}
	for _, a := range c.Fencing.Anomalies {
		found = append(found, checker.Interval{Start: min(a.Earlier.OK, a.Later.OK), End: max(a.Earlier.OK, a.Later.OK)})
	}
	if w := c.Linearizability.Window; w != nil {
		found = append(found, *w)
	}
	if s := c.Liveness.Stall; s != nil {
		found = append(found, *s)
	}
	pad := max(int64(1e9), 4*ttlMs*1e6)
	if len(found) == 0 {
		return []checker.Interval{{Start: res.Span.Start, End: res.Span.Start + 2*pad}}
	}
	slices.SortFunc(found, func(a, b checker.Interval) int { return int(min(max(a.Start-b.Start, -1), 1)) })
	var windows []checker.Interval
	for _, w := range found {
		w = checker.Interval{Start: w.Start - pad, End: w.End + pad}
		if n := len(windows); n > 0 && w.Start <= windows[n-1].End {
			windows[n-1].End = max(windows[n-1].End, w.End)
			continue
		}
		if len(windows) == maxExcerptWindows {
			break
		}
		windows = append(windows, w)
	}
	return windows
}

// opSampler keeps one operation in stride, in order, halving what it holds
// (and doubling stride) whenever it holds maxSampledOps.
type opSampler struct {
	events []history.Event // invoke and completion of each sampled operation
	stride int
	seen   int
}

func (s *opSampler) add(invoke, done history.Event) {
	if s.stride == 0 {
		s.stride = 1
	}
	s.seen++
	if (s.seen-1)%s.stride != 0 {
		return
	}
	s.events = append(s.events, invoke, done)
	if len(s.events) < 2*maxSampledOps {
		return
	}
	// Keep operations 0, 2*stride, 4*stride, ...: every other one held.
	kept := s.events[:0]
	for i := 0; i < len(s.events); i += 4 {
		kept = append(kept, s.events[i], s.events[i+1])
	}
	s.events = kept
	s.stride *= 2
}
