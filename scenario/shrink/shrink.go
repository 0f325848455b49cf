// Package shrink reduces a failing scenario to a smallest one that still
// fails the same checks: delta debugging over its timeline (drop steps),
// fewer clients, then shorter pauses and clock jumps, earlier steps and a
// shorter time limit. Each candidate is rerun several times and kept only when every
// try reproduces the failure, since a flaky candidate is no reproduction.
package shrink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/lockcheck/lockcheck/nemesis"
	"github.com/lockcheck/lockcheck/scenario"
)

// Runner runs a scenario once and reports whether it showed what the
// scenario expects (the same checks failed and its steps landed). An
// error is a run that could not be judged; it counts as no reproduction.
type Runner func(ctx context.Context, f *scenario.File) (bool, error)

// Options bound the search.
type Options struct {
	// Tries is how many runs of a candidate must all reproduce.
	Tries int
	// Budget bounds the whole search; when it runs out, the smallest
	// candidate found so far is the result.
	Budget time.Duration
	// Log receives one line per candidate tried.
	Log io.Writer
}

// Outcome is where the search ended.
type Outcome struct {
	// Minimal is the smallest scenario that reproduced, nil when the
	// starting one never did (or the search stopped before it could say).
	Minimal *scenario.File
	// Replays of the starting scenario, and how many reproduced.
	Replays, Reproduced int
	// Tried and Kept count candidates; OutOfBudget says the search was cut
	// short before no step could be removed.
	Tried, Kept int
	OutOfBudget bool
}

// NotReproduced is a starting scenario that failed the same checks in none
// of its replays: there is nothing to shrink.
type NotReproduced struct {
	Replays int
	// Why is what the first replay showed instead.
	Why string
}

func (e *NotReproduced) Error() string {
	return fmt.Sprintf("reproduced in 0 of %d replays (the first: %s): a step likely missed the moment the failure needs "+
		"(the race it met in the original run did not happen again), so there is nothing to shrink and nothing was written; "+
		"aim the step with when: at that moment, or replay it with more --tries", e.Replays, e.Why)
}

// Shrink searches, from f, for a smaller scenario that run still finds
// failing. It replays f opts.Tries times first: a shrink claims only what
// it saw, so a scenario that reproduces in none of them is refused
// (*NotReproduced), and Outcome says how often it did.
func Shrink(ctx context.Context, f *scenario.File, run Runner, opts Options) (Outcome, error) {
	if opts.Tries < 1 {
		opts.Tries = 1
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	parent := ctx
	if opts.Budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, opts.Budget, errOutOfBudget)
		defer cancel()
	}
	s := &search{ctx: ctx, run: run, opts: opts}
	var out Outcome
	out.Reproduced, out.Replays = s.replay(f)
	switch {
	case s.stopped():
		out.OutOfBudget = parent.Err() == nil
		if out.OutOfBudget {
			return out, fmt.Errorf("the budget ran out while replaying the starting scenario (%d of %d replays reproduced)", out.Reproduced, out.Replays)
		}
		return out, parent.Err()
	case out.Reproduced == 0:
		return out, &NotReproduced{Replays: out.Replays, Why: s.firstMiss}
	}
	s.best = f
	// What the scenario is made of goes first (its steps, its clients),
	// then how long each part lasts: a budget that runs out leaves the
	// fewest parts.
	for changed := true; changed && !s.stopped(); {
		changed = s.dropSteps()
		changed = s.renumberClients() || changed
		changed = s.fewerClients() || changed
		changed = s.shortenSteps() || changed
		changed = s.earlierSteps() || changed
		changed = s.shorterLimit() || changed
	}
	out.Minimal, out.Tried, out.Kept, out.OutOfBudget = s.best, s.tried, s.kept, s.stopped() && parent.Err() == nil
	// Interrupted (not out of budget): the smallest so far, and why.
	return out, parent.Err()
}

// errOutOfBudget says why a search stopped when its budget ran out.
var errOutOfBudget = errors.New("the budget ran out")

type search struct {
	ctx         context.Context
	run         Runner
	opts        Options
	best        *scenario.File
	tried, kept int
	// firstMiss is what the first replay of the starting scenario that
	// did not reproduce showed instead.
	firstMiss string
}

// replay runs the starting scenario opts.Tries times, every one of them
// (its rate is the point), and returns how many reproduced of how many
// ran.
func (s *search) replay(f *scenario.File) (reproduced, ran int) {
	for i := 1; i <= s.opts.Tries && !s.stopped(); i++ {
		ok, err := s.run(s.ctx, f)
		if s.stopped() {
			break
		}
		ran++
		if ok {
			reproduced++
			fmt.Fprintf(s.opts.Log, "replay %d of %d: reproduced\n", i, s.opts.Tries)
			continue
		}
		why := "it did not fail the same checks"
		if err != nil {
			why = err.Error()
		}
		if s.firstMiss == "" {
			s.firstMiss = why
		}
		fmt.Fprintf(s.opts.Log, "replay %d of %d: %s\n", i, s.opts.Tries, why)
	}
	return reproduced, ran
}

func (s *search) stopped() bool { return s.ctx.Err() != nil }

// try reruns candidate c, described by what, and keeps it when every try
// reproduces the failure.
func (s *search) try(what string, c *scenario.File) bool {
	if s.stopped() {
		return false
	}
	c, err := valid(c)
	if err != nil {
		fmt.Fprintf(s.opts.Log, "skip  %s: %v\n", what, err)
		return false
	}
	s.tried++
	for i := 1; i <= s.opts.Tries; i++ {
		ok, err := s.run(s.ctx, c)
		if s.stopped() {
			fmt.Fprintf(s.opts.Log, "stop  %s: %s\n", what, context.Cause(s.ctx))
			return false
		}
		if !ok {
			why := "it did not fail the same checks"
			if err != nil {
				why = err.Error()
			}
			fmt.Fprintf(s.opts.Log, "drop  %s: try %d of %d: %s\n", what, i, s.opts.Tries, why)
			return false
		}
	}
	s.kept++
	s.best = c
	fmt.Fprintf(s.opts.Log, "keep  %s: failed the same checks in %d of %d tries (%s)\n", what, s.opts.Tries, s.opts.Tries, size(c))
	return true
}

// dropSteps removes timeline steps, halves first (delta debugging), then
// one at a time, until no single step can go. Chunks go from the end: a
// candidate also ends a little after its last step (tail), so dropping the
// later steps first makes every later candidate shorter to run.
func (s *search) dropSteps() bool {
	changed := false
	for n := len(s.best.Timeline) / 2; n >= 1 && !s.stopped(); {
		removed := false
		for i := len(s.best.Timeline) - n; i >= 0 && !s.stopped(); i -= n {
			c := clone(s.best)
			c.Timeline = slices.Delete(c.Timeline, i, i+n)
			c.TimeLimit = min(c.TimeLimit, tail(c))
			what := describeDrop(s.best, i, n)
			if c.TimeLimit < s.best.TimeLimit {
				what += ", time limit " + c.TimeLimit.D().String()
			}
			if s.try(what, c) {
				removed, changed = true, true
				// The steps before i stay where they were: go on with
				// the chunk that ends where this one began.
			}
		}
		if !removed || n > len(s.best.Timeline)/2 {
			n /= 2
		}
	}
	return changed
}

func describeDrop(f *scenario.File, i, n int) string {
	if n == 1 {
		return fmt.Sprintf("drop step %d (%s)", i+1, DescribeStep(f.Timeline[i]))
	}
	return fmt.Sprintf("drop steps %d-%d", i+1, i+n)
}

// DescribeStep says a step as a line: "pause c1 for 1s when c1 reaches
// before-write".
func DescribeStep(st scenario.Step) string {
	out := st.Do + " " + st.Target + st.Fault
	if st.For > 0 {
		out += " for " + st.For.D().String()
	}
	if st.Offset != 0 {
		out += " by " + st.Offset.D().String()
	}
	if st.Wipe {
		out += " wiped"
	}
	if st.When != nil {
		out += " when " + st.When.Client + " reaches " + st.When.Reaches
		if st.When.Node != "" {
			out += " with " + st.When.Node
		}
	}
	return out + " at " + st.At.D().String()
}

// shortenSteps halves each pause and clock jump while the failure stays.
func (s *search) shortenSteps() bool {
	changed := false
	for i := 0; i < len(s.best.Timeline) && !s.stopped(); i++ {
		for !s.stopped() {
			st := s.best.Timeline[i]
			c := clone(s.best)
			switch {
			case st.For >= scenario.Duration(20*time.Millisecond):
				c.Timeline[i].For = roundMs(st.For / 2)
			case st.Do == "clock" && abs(st.Offset) >= scenario.Duration(20*time.Millisecond):
				c.Timeline[i].Offset = roundMs(st.Offset / 2)
			default:
				st.Do = "" // nothing left to shorten
			}
			if st.Do == "" || !s.try(fmt.Sprintf("shorten step %d to %s", i+1, DescribeStep(c.Timeline[i])), c) {
				break
			}
			changed = true
		}
	}
	return changed
}

// earlierSteps halves when each step may start, so that a shorter time
// limit can hold it (a step aimed at a moment still waits for it).
func (s *search) earlierSteps() bool {
	changed := false
	for i := 0; i < len(s.best.Timeline) && !s.stopped(); i++ {
		for s.best.Timeline[i].At >= scenario.Duration(200*time.Millisecond) && !s.stopped() {
			c := clone(s.best)
			c.Timeline[i].At = roundMs(c.Timeline[i].At / 2)
			if !s.try(fmt.Sprintf("start step %d at %s", i+1, c.Timeline[i].At.D()), c) {
				break
			}
			changed = true
		}
	}
	return changed
}

// renumberClients names the timeline's clients c0, c1, ... in the order
// they appear: clients are alike, and a timeline that names c3 alone needs
// four of them where it could need one.
func (s *search) renumberClients() bool {
	names := map[string]string{}
	rename := func(n string) string {
		if !isClient(n) {
			return n
		}
		if _, ok := names[n]; !ok {
			names[n] = fmt.Sprintf("c%d", len(names))
		}
		return names[n]
	}
	c := clone(s.best)
	same := true
	for i, st := range c.Timeline {
		c.Timeline[i].Target = rename(st.Target)
		if st.When != nil {
			w := *st.When
			w.Client = rename(w.Client)
			c.Timeline[i].When = &w
		}
		same = same && c.Timeline[i].Target == st.Target && whenClient(c.Timeline[i]) == whenClient(st)
	}
	if same {
		return false
	}
	return s.try("rename the clients c0, c1, ... in order", c)
}

// isClient tells a client's name (c3) from a node's.
func isClient(name string) bool {
	var i int
	n, err := fmt.Sscanf(name, "c%d", &i)
	return err == nil && n == 1 && fmt.Sprintf("c%d", i) == name
}

// fewerClients removes clients down to the fewest the timeline names.
func (s *search) fewerClients() bool {
	changed := false
	for s.best.Clients > minClients(s.best) && !s.stopped() {
		c := clone(s.best)
		c.Clients--
		if !s.try(fmt.Sprintf("%d clients", c.Clients), c) {
			break
		}
		changed = true
	}
	return changed
}

// minClients is one more than the highest client the timeline names, and
// at least two: one client alone cannot share a lock.
func minClients(f *scenario.File) int {
	n := 2
	for _, st := range f.Timeline {
		for _, name := range []string{st.Target, whenClient(st)} {
			var i int
			if isClient(name) {
				fmt.Sscanf(name, "c%d", &i) //nolint:errcheck // isClient read it
				n = max(n, i+1)
			}
		}
	}
	return n
}

func whenClient(st scenario.Step) string {
	if st.When == nil {
		return ""
	}
	return st.When.Client
}

// shorterLimit halves the time limit, down to the tail of its timeline.
func (s *search) shorterLimit() bool {
	changed := false
	for !s.stopped() {
		limit := max(roundMs(s.best.TimeLimit/2), tail(s.best))
		if limit >= s.best.TimeLimit {
			break
		}
		c := clone(s.best)
		c.TimeLimit = limit
		if !s.try("time limit "+limit.D().String(), c) {
			break
		}
		changed = true
	}
	return changed
}

// tail is the shortest time limit that still holds every step's fault and
// what follows it: four leases and a second after the last step ends (a
// paused holder's late write, the next grants), and at least that after
// the start; a step waiting for a bare majority has room to meet it.
func tail(f *scenario.File) scenario.Duration {
	after := f.TTL*4 + scenario.Duration(time.Second)
	end := scenario.Duration(0)
	for _, st := range f.Timeline {
		stepEnd := st.At + st.For
		if st.When != nil && st.When.Reaches == nemesis.MomentBareMajority {
			stepEnd += scenario.Duration(nemesis.BareMajorityWait) // room to meet the race
		}
		end = max(end, stepEnd)
	}
	return roundMs(end + after)
}

// size says how big a scenario is, for the log.
func size(f *scenario.File) string {
	steps := "steps"
	if len(f.Timeline) == 1 {
		steps = "step"
	}
	return fmt.Sprintf("%d %s, %d clients, time limit %s", len(f.Timeline), steps, f.Clients, f.TimeLimit.D())
}

func clone(f *scenario.File) *scenario.File {
	c := *f
	c.Timeline = slices.Clone(f.Timeline)
	return &c
}

// valid checks a candidate as a scenario file would be checked, by writing
// it and reading it back.
func valid(c *scenario.File) (*scenario.File, error) {
	data, err := c.Marshal()
	if err != nil {
		return nil, err
	}
	return scenario.Parse(c.Name, data)
}

// roundMs rounds a duration to the millisecond, as a scenario writes it.
func roundMs(d scenario.Duration) scenario.Duration {
	return scenario.Duration(d.D().Round(time.Millisecond))
}

func abs(d scenario.Duration) scenario.Duration {
	if d < 0 {
		return -d
	}
	return d
}
