package results

import (
	"cmp"
	"io"
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

// excerptReader gathers a history's excerpt for its report while the
// checker reads it (checker.CheckFilesAt: one pass over the history): the
// header, every nemesis event, a sample of the operations, and the
// offsets and time bounds of its chunks of chunkEvents client events. The
// client events around what the checker found are read back afterwards
// from the chunks that hold them (read), so the history is read whole only
// once.
type excerptReader struct {
	h       *history.History
	invokes map[history.Process]history.Event
	ops     opSampler
	chunks  []excerptChunk
}

// chunkEvents is how many client events a chunk spans: memory is a few
// bytes per thousand events, and a window reads at most one chunk more
// than it needs at either end.
const chunkEvents = 1024

// excerptChunk is a stretch of a history's lines from offset, whose client
// events are timed from minTime to maxTime.
type excerptChunk struct {
	offset           int64
	events           int
	minTime, maxTime int64
}

func newExcerptReader() *excerptReader {
	return &excerptReader{h: &history.History{Excerpt: &history.Excerpt{Stride: 1}}, invokes: map[history.Process]history.Event{}}
}

func (x *excerptReader) header(hd history.Header) { x.h.Header = hd }

// event takes one event of the checker's pass, whose line begins at offset.
func (x *excerptReader) event(e *history.Event, offset int64) {
	x.h.Excerpt.Length++
	if e.Process == history.Nemesis {
		x.h.Events = append(x.h.Events, *e)
		return
	}
	if n := len(x.chunks); n == 0 || x.chunks[n-1].events == chunkEvents {
		x.chunks = append(x.chunks, excerptChunk{offset: offset, minTime: e.Time, maxTime: e.Time})
	}
	c := &x.chunks[len(x.chunks)-1]
	c.events++
	c.minTime, c.maxTime = min(c.minTime, e.Time), max(c.maxTime, e.Time)
	op := history.Event{Time: e.Time, Process: e.Process, Type: e.Type, F: e.F}
	if op.Type == history.Invoke {
		x.invokes[op.Process] = op
	} else if inv, ok := x.invokes[op.Process]; ok {
		delete(x.invokes, op.Process)
		x.ops.add(inv, op)
	}
}

// read completes the excerpt for the report of res from the history at
// path: the client events around the first findings (padded by a few
// leases), in the history's order with its nemesis events.
func (x *excerptReader) read(path string, res *checker.Result) (*history.History, error) {
	h := x.h
	h.Excerpt.Operations, h.Excerpt.Stride, h.Excerpt.Operated = x.ops.events, x.ops.stride, x.ops.seen
	h.Truncated = res.Truncated.History
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	nemesis := len(h.Events)
	for _, w := range excerptWindows(res, h.Header.Config.TTLms) {
		if err := x.readWindow(f, w); err != nil {
			return nil, err
		}
	}
	if len(h.Events) > nemesis {
		slices.SortStableFunc(h.Events, func(a, b history.Event) int { return cmp.Compare(a.Index, b.Index) })
	}
	return h, nil
}

// readWindow adds the first maxWindowEvents client events timed within w,
// read from the chunks whose times reach into it.
func (x *excerptReader) readWindow(f *os.File, w checker.Interval) error {
	first, last := -1, -1
	for i, c := range x.chunks {
		if c.maxTime >= w.Start && c.minTime <= w.End {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return nil
	}
	end := int64(-1) // to the end of the file
	if last+1 < len(x.chunks) {
		end = x.chunks[last+1].offset
	}
	var r io.Reader = io.NewSectionReader(f, x.chunks[first].offset, end-x.chunks[first].offset)
	if end < 0 {
		if _, err := f.Seek(x.chunks[first].offset, io.SeekStart); err != nil {
			return err
		}
		r = f
	}
	kept := 0
	_, err := history.SkimEvents(r, func(head history.Head, decode func() (*history.Event, error)) error {
		if head.Process == history.Nemesis || head.Time < w.Start || head.Time > w.End || kept == maxWindowEvents {
			return nil
		}
		kept++
		e, err := decode()
		if err == nil {
			x.h.Events = append(x.h.Events, *e)
		}
		return err
	})
	return err
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
