package checker

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/lockcheck/lockcheck/history"
)

// Linearizability results.
const (
	Linearizable           = "ok"
	NotLinearizable        = "illegal"
	LinearizabilityUnknown = "unknown"
)

// minSegmentOps is the length a segment reaches before it is cut at the
// next quiescent point; shorter segments would only add overhead. Tests cut
// small histories at every quiescent point to hold the cuts against the
// whole history.
var minSegmentOps = 500

const (
	// maxSegmentOps bounds what is handed to porcupine. Its cache clones a
	// bitset of the segment's length for every step, so memory grows with
	// the square of the length; a longer segment (one with no quiescent
	// point, such as after a write whose outcome is unknown forever) is
	// reported unknown instead.
	maxSegmentOps = 20000
)

// checkSegmentTimeout is porcupine's check, replaceable by tests.
var checkSegmentTimeout = porcupine.CheckOperationsTimeout

// The lock-protected read-modify-write is one operation per write attempt:
// from the read before the write to the write's completion, with the value
// read as output and the value written (and whether the resource took it)
// as input. A read that no write followed is a read-only operation.
type opKind uint8

const (
	opRead          opKind = iota // read only
	opWriteAccepted               // the resource took the write
	opWriteRefused                // the resource refused it, or it never arrived
	opWriteUnknown                // it may or may not have taken effect
	opWriteNoValue                // took effect (or may have) with a value nobody recorded
)

type rmwInput struct {
	kind    opKind
	value   int64
	process history.Process
}

type rmwOutput struct {
	read  int64
	known bool // false for a write with no read before it and no Read field
}

// regState is the set of values the counter may hold: any value (n == 0),
// one value, or one of two after a write of unknown outcome. Reads collapse
// it back to one value, so two is enough.
type regState struct {
	n    int8
	a, b int64
}

func oneValue(v int64) regState { return regState{n: 1, a: v} }

func (s regState) holds(v int64) bool { return s.n == 0 || s.a == v || (s.n == 2 && s.b == v) }

// stepRMW is the sequential model: the read must see a value the counter may
// hold; the counter then holds what was written if the resource took it,
// else what was read.
func stepRMW(s regState, in rmwInput, out rmwOutput) (bool, regState) {
	if out.known && !s.holds(out.read) {
		return false, s
	}
	switch in.kind {
	case opWriteAccepted:
		return true, oneValue(in.value)
	case opWriteNoValue:
		return true, regState{}
	case opWriteUnknown:
		if !out.known {
			return true, regState{}
		}
		lo, hi := min(out.read, in.value), max(out.read, in.value)
		if lo == hi {
			return true, oneValue(lo)
		}
		return true, regState{n: 2, a: lo, b: hi}
	}
	if out.known {
		return true, oneValue(out.read)
	}
	return true, s
}

// stateAfter is the counter's state after op when op was the last operation
// linearized so far: its read fixes the state before it.
func stateAfter(op porcupine.Operation) regState {
	before := regState{}
	if out := op.Output.(rmwOutput); out.known {
		before = oneValue(out.read)
	}
	_, s := stepRMW(before, op.Input.(rmwInput), op.Output.(rmwOutput))
	return s
}

func rmwModel(init regState) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return init },
		Step: func(state, input, output any) (bool, any) {
			return stepRMW(state.(regState), input.(rmwInput), output.(rmwOutput))
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(rmwInput), output.(rmwOutput)
			read := "?"
			if out.known {
				read = fmt.Sprint(out.read)
			}
			switch in.kind {
			case opWriteAccepted:
				return fmt.Sprintf("%s read %s, wrote %d", in.process, read, in.value)
			case opWriteRefused:
				return fmt.Sprintf("%s read %s, write %d refused", in.process, read, in.value)
			case opWriteUnknown:
				return fmt.Sprintf("%s read %s, wrote %d?", in.process, read, in.value)
			case opWriteNoValue:
				return fmt.Sprintf("%s read %s, wrote ?", in.process, read)
			}
			return fmt.Sprintf("%s read %s", in.process, read)
		},
		DescribeState: func(state any) string {
			s := state.(regState)
			switch s.n {
			case 0:
				return "?"
			case 1:
				return fmt.Sprint(s.a)
			}
			return fmt.Sprintf("%d or %d", s.a, s.b)
		},
	}
}

// keyOperations turns a key's writes and read-only reads (those the scan
// holds: the stretch being settled) into porcupine operations sorted by
// call. Lanes (ClientId) are dense per key, as the visualization wants
// them, and given in the order of the operations' calls, so that a key
// checked in stretches (a streamed check) gets the lanes it gets checked
// whole.
func keyOperations(k *keyFacts, outcomes *outcomes) []porcupine.Operation {
	ops := make([]porcupine.Operation, 0, len(k.writes)+len(k.reads))
	if k.lanes == nil {
		k.lanes = map[history.Process]int{}
	}
	lane := func(p history.Process) int {
		l, ok := k.lanes[p]
		if !ok {
			l = len(k.lanes)
			k.lanes[p] = l
		}
		return l
	}
	process := func(op porcupine.Operation) history.Process { return op.Input.(rmwInput).process }
	for i := range k.writes {
		w := &k.writes[i]
		r := outcomes.of(w)
		call, out := w.invoke, rmwOutput{}
		switch {
		case w.hasFrom:
			call, out = w.from.call, rmwOutput{read: w.from.value, known: true}
		case w.read != nil:
			out = rmwOutput{read: *w.read, known: true}
		}
		in := rmwInput{process: w.process}
		switch {
		case r.accepted == refused:
			in.kind = opWriteRefused
		case w.value == nil:
			in.kind = opWriteNoValue
		case r.accepted == accepted:
			in.kind = opWriteAccepted
		default:
			in.kind = opWriteUnknown
		}
		if w.value != nil {
			in.value = *w.value
		}
		ops = append(ops, porcupine.Operation{
			Input: in, Output: out, Call: call, Return: max(r.at, call),
		})
	}
	for _, rd := range k.reads {
		ops = append(ops, porcupine.Operation{
			Input:  rmwInput{kind: opRead, process: rd.process},
			Output: rmwOutput{read: rd.value, known: true},
			Call:   rd.call, Return: rd.ret,
		})
	}
	slices.SortFunc(ops, func(a, b porcupine.Operation) int {
		return cmp.Or(cmp.Compare(a.Call, b.Call), cmp.Compare(a.Return, b.Return), cmp.Compare(process(a), process(b)))
	})
	for i := range ops {
		ops[i].ClientId = lane(process(ops[i]))
	}
	return ops
}

// segment is a stretch of one key's operations that is checked on its own,
// from a known initial state.
type segment struct {
	key    string
	number int // 1-based, within the key
	ops    []porcupine.Operation
	size   int // len(ops), also once ops were let go
	init   regState
	window Interval // its End is the latest return, before the end of the span caps it
}

// segmenter cuts a key's operations, fed in call order, at quiescent
// points. A cut before op i is sound when every earlier op returned before
// op i was called and op i-1 is itself disjoint from all ops before it: op
// i-1 is then last in every linearization of the ops before the cut, and
// the state after it, which starts the next segment, is determined.
type segmenter struct {
	key  string
	open []porcupine.Operation // the segment being cut
	init regState              // the resource's value before the history is not known
	// returnedBefore is the latest return among the ops before the last
	// one, returned among all; segReturned the latest in open.
	returnedBefore, returned, segReturned int64
	segments                              int
}

func newSegmenter(key string) segmenter {
	return segmenter{key: key, returnedBefore: math.MinInt64, returned: math.MinInt64, segReturned: math.MinInt64}
}

// add takes the next op, handing closed the segment a cut before it ends.
func (g *segmenter) add(op porcupine.Operation, closed func(segment)) {
	if n := len(g.open); n >= minSegmentOps && g.returned < op.Call && g.returnedBefore < g.open[n-1].Call {
		last := g.open[n-1]
		g.close(closed)
		g.init = stateAfter(last)
	}
	g.returnedBefore, g.returned = g.returned, max(g.returned, op.Return)
	g.segReturned = max(g.segReturned, op.Return)
	g.open = append(g.open, op)
}

// close hands closed the open segment, if any.
func (g *segmenter) close(closed func(segment)) {
	if len(g.open) == 0 {
		return
	}
	g.segments++
	closed(segment{
		key: g.key, number: g.segments, ops: g.open, size: len(g.open), init: g.init,
		window: Interval{Start: g.open[0].Call, End: g.segReturned},
	})
	g.open, g.segReturned = nil, math.MinInt64
}

// segmentOps cuts a key's operations (sorted by call) as the segmenter
// does, with windows capped at spanEnd.
func segmentOps(key string, ops []porcupine.Operation, spanEnd int64) []segment {
	var segs []segment
	g := newSegmenter(key)
	keep := func(s segment) {
		s.window.End = min(s.window.End, spanEnd)
		segs = append(segs, s)
	}
	for _, op := range ops {
		g.add(op, keep)
	}
	g.close(keep)
	return segs
}

// maxUndecided bounds the undecided segments kept, operations and all, for
// a second try once every segment had its first: a history porcupine
// cannot decide segment after segment is unknown whatever comes later.
const maxUndecided = 16

// linearizabilityCheck checks every key's segments, as they are cut, within
// one budget of search time. Each segment gets at most half of what is
// left at its turn, so that one hard segment cannot hide an illegal one
// after it; at the end, the segments that ran out of time share all that
// is left. It keeps the first segment found illegal, else the undecided
// ones.
type linearizabilityCheck struct {
	timeout    time.Duration
	spent      time.Duration
	segments   int
	operations int
	illegal    *segment
	undecided  []segment // the first ones in order; past maxUndecided without their ops
}

func newLinearizabilityCheck(timeout time.Duration) *linearizabilityCheck {
	return &linearizabilityCheck{timeout: timeout}
}

// add checks a segment as it is cut. Once one was illegal the rest are
// only counted: the first illegal segment is the result.
func (c *linearizabilityCheck) add(seg segment) {
	c.segments++
	c.operations += seg.size
	if c.illegal != nil {
		return
	}
	switch c.check(&seg, 2) {
	case porcupine.Illegal:
		c.illegal = &seg
	case porcupine.Unknown:
		switch len(c.undecided) {
		case maxUndecided:
			// Past the first maxUndecided only the first of the rest is
			// kept, without its operations, to name it if nothing better
			// can be said.
			seg.ops = nil
			c.undecided = append(c.undecided, seg)
		case maxUndecided + 1:
		default:
			c.undecided = append(c.undecided, seg)
		}
	}
}

// run gives the undecided segments all that is left of the budget, and
// returns the first segment found illegal, else the first undecided one,
// with its result; nil when all are linearizable.
func (c *linearizabilityCheck) run() (*segment, porcupine.CheckResult) {
	if c.illegal != nil {
		return c.illegal, porcupine.Illegal
	}
	var still []segment
	for i := range c.undecided {
		seg := &c.undecided[i]
		if seg.ops != nil {
			switch c.check(seg, 1) {
			case porcupine.Illegal:
				c.illegal = seg
				return seg, porcupine.Illegal
			case porcupine.Ok:
				continue
			}
		}
		still = append(still, *seg)
	}
	if len(still) > 0 {
		return &still[0], porcupine.Unknown
	}
	return nil, porcupine.Ok
}

// check runs porcupine on seg with the remaining budget divided by
// sharers. Segments porcupine cannot hold in memory are undecided.
func (c *linearizabilityCheck) check(seg *segment, sharers int) porcupine.CheckResult {
	remaining := (c.timeout - c.spent) / time.Duration(sharers)
	if remaining <= 0 || seg.size > maxSegmentOps {
		return porcupine.Unknown
	}
	began := time.Now()
	res := checkSegmentTimeout(rmwModel(seg.init), seg.ops, remaining)
	c.spent += time.Since(began)
	return res
}

// result is the check's conclusion; segmentsOf counts a key's segments and
// span bounds the history, for the details.
func (c *linearizabilityCheck) result(segmentsOf func(key string) int, span Interval) Linearizability {
	res := Linearizability{Result: Linearizable, Segments: c.segments, Operations: c.operations}
	seg, verdict := c.run()
	if seg == nil {
		return res
	}
	window := Interval{Start: seg.window.Start, End: min(seg.window.End, span.End)}
	res.Window, res.Key, res.failing = &window, seg.key, seg
	where := fmt.Sprintf("segment %d of %d on %s (%d operations, %s to %s)", seg.number, segmentsOf(seg.key), seg.key,
		seg.size, relSeconds(window.Start-span.Start), relSeconds(window.End-span.Start))
	switch {
	case verdict == porcupine.Illegal:
		res.Result = NotLinearizable
		res.Detail = where + " has no linearization"
	case seg.size > maxSegmentOps:
		res.Result = LinearizabilityUnknown
		res.Detail = fmt.Sprintf("%s has no quiescent point to cut at and is over the %d-operation limit", where, maxSegmentOps)
	default:
		res.Result = LinearizabilityUnknown
		res.Detail = fmt.Sprintf("%s could not be decided within the %s timeout", where, c.timeout)
	}
	return res
}

// ErrNothingToVisualize is returned by Linearizability.Visualize when
// every segment is linearizable or the failing one is too large to show.
var ErrNothingToVisualize = errors.New("linearizability: no segment to visualize")

// Visualize writes porcupine's HTML visualization of the first segment
// that is not linearizable (or could not be decided) to w: the one this
// check found, as its scan cut it. A result read back from results.json
// has none to draw.
func (l *Linearizability) Visualize(opts Options, w io.Writer) error {
	opts = opts.withDefaults()
	seg := l.failing
	if seg == nil || seg.ops == nil || seg.size > maxSegmentOps {
		return ErrNothingToVisualize
	}
	model := rmwModel(seg.init)
	_, info := porcupine.CheckOperationsVerbose(model, seg.ops, opts.LinearizabilityTimeout)
	return porcupine.Visualize(model, info, w)
}

// Linearizability of the lock-protected read-modify-write history.
type Linearizability struct {
	Result     string    `json:"result"` // ok, illegal or unknown
	Operations int       `json:"operations"`
	Segments   int       `json:"segments"`
	Window     *Interval `json:"window,omitempty"` // the segment that was illegal or timed out
	Key        string    `json:"key,omitempty"`    // the key of that segment
	Detail     string    `json:"detail,omitempty"`
	// failing is that segment, as the check cut it, for Visualize: drawing
	// it needs no second scan of the history.
	failing *segment
}

// Judge fails linearizability on an illegal history; anything but a
// finished search, an empty result included, is unknown, never a pass.
func (l *Linearizability) Judge(JudgeContext) Judgement {
	switch l.Result {
	case Linearizable:
		return Judgement{Status: StatusOK}
	case NotLinearizable:
		return Judgement{StatusFailed, "The lock-protected read-modify-write history is not linearizable."}
	}
	msg := "The linearizability check could not finish, so its result is unknown, not a pass"
	if l.Detail != "" {
		msg += " (" + strings.TrimSuffix(l.Detail, ".") + ")"
	}
	return Judgement{StatusUnknown, msg + "."}
}

// conclude takes the verdict of every segment, or on the settled
// stretches only whether one was illegal.
func (l *Linearizability) conclude(c *conclusion) {
	s := c.s
	switch {
	case !c.settled:
		*l = s.lin.result(func(key string) int { return s.keys[key].settled.lin.segments }, c.span)
	case s.lin.illegal != nil:
		seg := s.lin.illegal
		*l = Linearizability{Result: NotLinearizable, Key: seg.key, Window: &seg.window}
	default:
		*l = Linearizability{Result: Linearizable}
	}
}

// AnomalyCount is one: an illegal result is one finding.
func (l *Linearizability) AnomalyCount() int { return 1 }

// AnomalyTimes is the end of the illegal segment: the anomaly is somewhere
// in it, certain only once it is complete.
func (l *Linearizability) AnomalyTimes(note func(int64)) {
	if l.Window != nil {
		note(l.Window.End)
	}
}

// EvidenceLines are the operations and segments checked, the window of an
// illegal or unfinished segment and porcupine's detail.
func (l *Linearizability) EvidenceLines(_ Status, t0 int64) (string, []string) {
	var details []string
	if l.Window != nil {
		details = []string{fmt.Sprintf("window %s to %s", RelSec(l.Window.Start, t0), RelSec(l.Window.End, t0))}
	}
	if l.Detail != "" {
		details = append(details, l.Detail)
	}
	return fmt.Sprintf("%s in %s", Plural(l.Operations, "operation"), Plural(l.Segments, "segment")), details
}
