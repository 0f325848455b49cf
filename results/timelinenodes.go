package results

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/lockcheck/lockcheck/history"
)

// clientName is how a client process names itself as a nemesis target.
var clientName = regexp.MustCompile(`^c[0-9]+$`)

// nodeNames lists the lock service's nodes the nemesis acted on: targets of
// nemesis events that are neither a client process nor a lock key.
func nodeNames(h *history.History) []string {
	keys := map[string]bool{}
	for i := range h.Events {
		if k := h.Events[i].Key; k != "" {
			keys[k] = true
		}
	}
	seen := map[string]bool{}
	var nodes []string
	for i := range h.Events {
		e := &h.Events[i]
		if e.Process != history.Nemesis || e.Value == nil || observesOnly(e.F) {
			continue
		}
		t := e.Value.Target
		if t == "" || keys[t] || clientName.MatchString(t) || seen[t] {
			continue
		}
		seen[t] = true
		nodes = append(nodes, t)
	}
	sort.Strings(nodes)
	return nodes
}

// faultClass is the CSS class a fault is shaded with: its own for a verb
// that puts its target in a state (paused, killed, cut off), else
// fault-other.
func faultClass(verb string) string {
	if history.VerbOf(verb).State != "" {
		return "fault-" + verb
	}
	return "fault-other"
}

// observesOnly is a nemesis verb that records something without acting on
// a node (history's verb table).
func observesOnly(verb string) bool { return history.VerbOf(verb).ObservesOnly() }

// nodeEvent draws what nemesis event e says of node, as history's verb
// table has it (Verb.Lane): the marks it closes and opens, and its point.
func (b *builder) nodeEvent(e *history.Event, node string, closeBar func(node, class string, t int64), openBar func(node, class string, t int64, text string)) {
	v := history.VerbOf(e.F)
	lane, detail := v.Lane, e.Value.Detail
	if lane.Point && detail != "" {
		if lane.Note != "" {
			detail = lane.Note + ": " + detail
		}
		b.nodePoint(node, e, detail)
	}
	if v.Role == history.Heals {
		if m := history.VerbOf(v.Heals).Lane.Mark; m != "" {
			closeBar(node, "node-"+m, e.Time)
		}
		return
	}
	for _, ended := range v.Ends {
		if m := history.VerbOf(ended).Lane.Mark; m != "" {
			closeBar(node, "node-"+m, e.Time)
		}
	}
	if lane.Mark == "" {
		if !lane.Point {
			b.nodePoint(node, e, detail)
		}
		return
	}
	class := "node-" + lane.Mark
	closeBar(node, class, e.Time)
	text := cmp.Or(lane.Text, v.State)
	switch {
	case lane.FromDetail:
		text = cmp.Or(detail, e.F)
	case lane.Offset:
		// Detail is "+20s", a strobe, or "<text> offset +20s".
		offset := strings.TrimPrefix(strings.TrimSpace(detail), text+" offset ")
		if offset == "" && e.Value.DurationMs != 0 {
			offset = fmt.Sprintf("%+d ms", e.Value.DurationMs)
		}
		if offset == "" || zeroOffset.MatchString(offset) {
			return
		}
		text += " " + offset
	case len(e.Value.Links) > 0:
		// A cut of single links names the other ends; a container
		// disconnected from the run's network is cut off from all.
		text = "cut from: " + strings.Join(e.Value.Links, ", ")
	}
	openBar(node, class, e.Time, text)
}

// zeroOffset is a clock detail that puts a node's clock back.
var zeroOffset = regexp.MustCompile(`^[+-]?0*(\.0*)?[a-z]*$`)

// nodeStates draws each node's lane: a thin line while it is up, and bars
// while it is paused, killed or cut off the network, its clock is off, or it holds a role
// (master, leader), from the nemesis events that name it.
func (b *builder) nodeStates(h *history.History, end int64) {
	if len(b.nodeLane) == 0 {
		return
	}
	type open struct {
		start int64
		text  string
	}
	state := map[string]map[string]open{} // node -> bar class -> since
	closeBar := func(node, class string, t int64) {
		o, ok := state[node][class]
		if !ok {
			return
		}
		delete(state[node], class)
		b.nodeBar(node, class, o.start, t, o.text)
	}
	openBar := func(node, class string, t int64, text string) {
		if state[node] == nil {
			state[node] = map[string]open{}
		}
		state[node][class] = open{t, text}
	}
	for _, n := range sortedKeys(b.nodeLane) {
		l := b.nodeLane[n]
		x0, x1 := b.x(b.t0), b.x(end)
		b.tl.Bars = append(b.tl.Bars, b.timed(shape{Class: "node-up", Title: n + " up unless marked otherwise",
			X: x0, Y: b.midY(l) - 1, W: round1(x1 - x0), H: 2}, b.t0, end))
	}
	for i := range h.Events {
		e := &h.Events[i]
		if e.Process != history.Nemesis || e.Value == nil {
			continue
		}
		node := e.Value.Target
		if _, ok := b.nodeLane[node]; !ok || observesOnly(e.F) || isLinkFault(e.F) {
			continue
		}
		b.nodeEvent(e, node, closeBar, openBar)
	}
	for _, node := range sortedKeys(state) {
		for _, class := range sortedKeys(state[node]) {
			closeBar(node, class, end)
		}
	}
}

// isLinkFault is the start of a fault that shapes links (history's
// Verb.Link) or the verb that heals it.
func isLinkFault(verb string) bool {
	v := history.VerbOf(verb)
	return v.Link != "" || v.Role == history.Heals && history.VerbOf(v.Heals).Link != ""
}

// linkStates draws each slowed or flaky link as a bar for as long as the
// fault holds, on the lane of its target ("slow to c1, redis-1: ...") and
// on the lane of each other end that has one ("slow to redis-0: ..."),
// with what the fault did to the links (its detail).
func (b *builder) linkStates(h *history.History, end int64) {
	type open struct {
		lane       int
		name, text string
		class      string
		start      int64
	}
	bars := map[string][]open{} // target -> the bars its start opened
	closeAll := func(target string, t int64) {
		for _, o := range bars[target] {
			b.laneBar(o.lane, o.name, o.class, o.start, t, o.text)
		}
		delete(bars, target)
	}
	for i := range h.Events {
		e := &h.Events[i]
		if e.Process != history.Nemesis || e.Value == nil {
			continue
		}
		target := e.Value.Target
		if !isLinkFault(e.F) {
			continue
		}
		// A heal ends the bars of its target; so does a new start.
		closeAll(target, e.Time)
		verb := history.VerbOf(e.F).Link
		if verb == "" {
			continue
		}
		class := "link-" + verb
		say := func(to string) string {
			if e.Value.Detail == "" {
				return verb + " to " + to
			}
			return verb + " to " + to + ": " + e.Value.Detail
		}
		if l, ok := b.laneNamed(target); ok && len(e.Value.Links) > 0 {
			bars[target] = append(bars[target], open{l, target, say(strings.Join(e.Value.Links, ", ")), class, e.Time})
		}
		for _, peer := range e.Value.Links {
			if l, ok := b.laneNamed(peer); ok {
				bars[target] = append(bars[target], open{l, peer, say(target), class, e.Time})
			}
		}
	}
	for _, target := range sortedKeys(bars) {
		closeAll(target, end)
	}
}

// laneNamed is the lane of a node or of a client process (c3).
func (b *builder) laneNamed(name string) (int, bool) {
	if l, ok := b.nodeLane[name]; ok {
		return l, true
	}
	if !clientName.MatchString(name) {
		return 0, false
	}
	p, err := strconv.Atoi(name[1:])
	if err != nil {
		return 0, false
	}
	l, ok := b.laneOf[history.Process(p)]
	return l, ok
}

// nodeBar draws one state of a node, with its text inside when it fits.
func (b *builder) nodeBar(node, class string, start, end int64, text string) {
	b.laneBar(b.nodeLane[node], node, class, start, end, text)
}

// laneBar draws one state of what lane l shows (a node, a client's
// links), with its text inside when it fits.
func (b *builder) laneBar(l int, name, class string, start, end int64, text string) {
	x0, x1 := b.x(start), b.x(end)
	title := fmt.Sprintf("%s %s from %s to %s", name, text, relSec(start, b.t0), relSec(end, b.t0))
	b.tl.Bars = append(b.tl.Bars, b.timed(shape{Class: class, Title: title,
		X: x0, Y: b.laneY(l) + (pitch-barH)/2, W: round1(math.Max(2, x1-x0)), H: barH}, start, end))
	b.label(x0, x1, b.midY(l)+3.5, "node-label", text, start, end)
}

// nodePoint marks a nemesis event on a node that is not a state.
func (b *builder) nodePoint(node string, e *history.Event, detail string) {
	title := fmt.Sprintf("%s %s at %s", e.F, node, relSec(e.Time, b.t0))
	if detail != "" {
		title += ": " + detail
	}
	b.mark(shape{Class: "node-event", Title: title}, diamond, b.x(e.Time), b.midY(b.nodeLane[node]), markR+1, e.Time)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
