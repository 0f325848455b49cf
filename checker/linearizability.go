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

// keyOperations turns a key's writes and read-only reads into porcupine
// operations sorted by call. Lanes (ClientId) are dense per key, as the
// visualization wants them.
func keyOperations(k *keyFacts, outcomes *outcomes) []porcupine.Operation {
	ops := make([]porcupine.Operation, 0, len(k.writes)+len(k.reads))
	lanes := map[history.Process]int{}
	lane := func(p history.Process) int {
		l, ok := lanes[p]
		if !ok {
			l = len(lanes)
			lanes[p] = l
		}
		return l
	}
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
			ClientId: lane(w.process), Input: in, Output: out, Call: call, Return: max(r.at, call),
		})
	}
	for _, rd := range k.reads {
		ops = append(ops, porcupine.Operation{
			ClientId: lane(rd.process),
			Input:    rmwInput{kind: opRead, process: rd.process},
			Output:   rmwOutput{read: rd.value, known: true},
			Call:     rd.call, Return: rd.ret,
		})
	}
	slices.SortFunc(ops, func(a, b porcupine.Operation) int {
		return cmp.Or(cmp.Compare(a.Call, b.Call), cmp.Compare(a.Return, b.Return))
	})
	return ops
}

// segment is a stretch of one key's operations that is checked on its own,
// from a known initial state.
type segment struct {
	key    string
	number int // 1-based, within the key
	of     int // segments of the key
	ops    []porcupine.Operation
	init   regState
	window Interval
}

// segmentOps cuts a key's operations (sorted by call) at quiescent points.
// A cut before op i is sound when every earlier op returned before op i was
// called and op i-1 is itself disjoint from all ops before it: op i-1 is
// then last in every linearization of the ops before the cut, and the state
// after it, which starts the next segment, is determined.
func segmentOps(key string, ops []porcupine.Operation, spanEnd int64) []segment {
	var segs []segment
	start := 0
	init := regState{} // the resource's value before the history is not known
	cut := func(end int, maxReturn int64) {
		segs = append(segs, segment{
			key: key, number: len(segs) + 1, ops: ops[start:end], init: init,
			window: Interval{Start: ops[start].Call, End: min(maxReturn, spanEnd)},
		})
	}
	// returnedBefore is the latest return among ops[:i-1], returned among ops[:i].
	returnedBefore, returned := int64(math.MinInt64), int64(math.MinInt64)
	segReturned := int64(math.MinInt64) // latest return in the current segment
	for i := range ops {
		if i-start >= minSegmentOps && returned < ops[i].Call && returnedBefore < ops[i-1].Call {
			cut(i, segReturned)
			init, start, segReturned = stateAfter(ops[i-1]), i, math.MinInt64
		}
		returnedBefore, returned = returned, max(returned, ops[i].Return)
		segReturned = max(segReturned, ops[i].Return)
	}
	if start < len(ops) {
		cut(len(ops), segReturned)
	}
	for i := range segs {
		segs[i].of = len(segs)
	}
	return segs
}

// linearizabilityCheck checks every key's segments against one deadline.
type linearizabilityCheck struct {
	segments []segment
	deadline time.Time
	timeout  time.Duration
	spanFrom int64 // for times in details
}

func newLinearizabilityCheck(f *facts, outcomes *outcomes, timeout time.Duration) *linearizabilityCheck {
	c := &linearizabilityCheck{deadline: time.Now().Add(timeout), timeout: timeout, spanFrom: f.span.Start}
	for _, k := range f.keys {
		ops := keyOperations(k, outcomes)
		if len(ops) > 0 {
			c.segments = append(c.segments, segmentOps(k.key, ops, f.span.End)...)
		}
	}
	return c
}

// run checks the segments in order. A first pass gives each segment its
// share of the remaining time, so that one hard segment cannot hide an
// illegal one after it; a second pass gives the segments that ran out of
// time all that is left. It returns the first segment found illegal, else
// the first undecided one, with its result; nil when all are linearizable.
func (c *linearizabilityCheck) run() (*segment, porcupine.CheckResult) {
	var undecided []int
	for i := range c.segments {
		switch c.check(i, len(c.segments)-i) {
		case porcupine.Illegal:
			return &c.segments[i], porcupine.Illegal
		case porcupine.Unknown:
			undecided = append(undecided, i)
		}
	}
	for _, i := range undecided {
		if c.check(i, 1) == porcupine.Illegal {
			return &c.segments[i], porcupine.Illegal
		}
	}
	if len(undecided) > 0 {
		return &c.segments[undecided[0]], porcupine.Unknown
	}
	return nil, porcupine.Ok
}

// check runs porcupine on segment i with the remaining time divided by
// sharers. Segments porcupine cannot hold in memory are undecided.
func (c *linearizabilityCheck) check(i, sharers int) porcupine.CheckResult {
	seg := &c.segments[i]
	remaining := time.Until(c.deadline) / time.Duration(sharers)
	if remaining <= 0 || len(seg.ops) > maxSegmentOps {
		return porcupine.Unknown
	}
	return checkSegmentTimeout(rmwModel(seg.init), seg.ops, remaining)
}

func (c *linearizabilityCheck) result() Linearizability {
	res := Linearizability{Result: Linearizable, Segments: len(c.segments)}
	for _, s := range c.segments {
		res.Operations += len(s.ops)
	}
	seg, verdict := c.run()
	if seg == nil {
		return res
	}
	res.Window, res.Key = &seg.window, seg.key
	where := fmt.Sprintf("segment %d of %d on %s (%d operations, %s to %s)", seg.number, seg.of, seg.key,
		len(seg.ops), relSeconds(seg.window.Start-c.spanFrom), relSeconds(seg.window.End-c.spanFrom))
	switch {
	case verdict == porcupine.Illegal:
		res.Result = NotLinearizable
		res.Detail = where + " has no linearization"
	case len(seg.ops) > maxSegmentOps:
		res.Result = LinearizabilityUnknown
		res.Detail = fmt.Sprintf("%s has no quiescent point to cut at and is over the %d-operation limit", where, maxSegmentOps)
	default:
		res.Result = LinearizabilityUnknown
		res.Detail = fmt.Sprintf("%s could not be decided within the %s timeout", where, c.timeout)
	}
	return res
}

// ErrNothingToVisualize is returned by LinearizabilityVisualization when
// every segment is linearizable or the failing one is too large to show.
var ErrNothingToVisualize = errors.New("linearizability: no segment to visualize")

// LinearizabilityVisualization writes porcupine's HTML visualization of the
// first segment that is not linearizable (or could not be decided) to w.
func LinearizabilityVisualization(h *history.History, resource []history.ResourceEntry, opts Options, w io.Writer) error {
	opts = opts.withDefaults()
	f := scan(h, opts.ClockAllowance)
	c := newLinearizabilityCheck(f, newOutcomes(resource), opts.LinearizabilityTimeout)
	seg, _ := c.run()
	if seg == nil || len(seg.ops) > maxSegmentOps {
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
