package shrink

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/scenario"
)

func dur(d time.Duration) scenario.Duration { return scenario.Duration(d) }

// busy is a failing run's reproduction: eight pauses of which only the
// one of c1 at its failpoint, 1s long, breaks the lock.
func busy(t *testing.T) *scenario.File {
	t.Helper()
	f := &scenario.File{
		Name: "repro-busy", Backend: "redis", Variant: "correct", Workload: "unfenced", TTL: dur(500 * time.Millisecond),
		Clients: 5, Think: "20ms", TimeLimit: dur(30 * time.Second), Expect: scenario.Expect{Verdict: "false", Fail: []string{"resource"}},
	}
	for i := range 8 {
		c := fmt.Sprintf("c%d", i%5)
		f.Timeline = append(f.Timeline, scenario.Step{
			At: dur(time.Duration(i) * 2 * time.Second), When: &scenario.When{Client: c, Reaches: "before-write"},
			Do: "pause", Target: c, For: dur(time.Second),
		})
	}
	return f
}

// breaks is the fake lock's failure: a pause of c1 longer than 600ms with
// at least two clients and time after it to write.
func breaks(f *scenario.File) bool {
	for _, s := range f.Timeline {
		if (s.Target == "c1" || s.Target == "c0" && len(f.Timeline) == 1) && s.For.D() > 600*time.Millisecond && f.Clients >= 2 && f.TimeLimit > s.At+s.For {
			return true
		}
	}
	return false
}

func TestShrinkFindsTheOneStep(t *testing.T) {
	runs := 0
	run := func(_ context.Context, f *scenario.File) (bool, error) {
		runs++
		return breaks(f), nil
	}
	var log bytes.Buffer
	out, err := Shrink(context.Background(), busy(t), run, Options{Tries: 3, Log: &log})
	require.NoError(t, err)
	m := out.Minimal
	require.Len(t, m.Timeline, 1, log.String())
	assert.Equal(t, "c0", m.Timeline[0].Target, "c1 alone is renamed c0")
	assert.Greater(t, m.Timeline[0].For.D(), 600*time.Millisecond, "a shorter pause no longer breaks the lock")
	assert.LessOrEqual(t, m.Timeline[0].For.D(), time.Second)
	assert.Equal(t, 2, m.Clients)
	assert.Less(t, m.TimeLimit.D(), 30*time.Second)
	assert.Less(t, m.Timeline[0].At.D(), 200*time.Millisecond, "the step starts as early as it can")
	assert.False(t, out.OutOfBudget)
	assert.GreaterOrEqual(t, runs, 3*out.Kept, "every kept candidate ran all its tries")
	assert.Contains(t, log.String(), "keep  drop steps 5-8, time limit 10s", "the later half goes first, and the time after it")
	assert.Contains(t, log.String(), "keep  2 clients")
	assert.True(t, breaks(m))
}

func TestShrinkKeepsNothingFlaky(t *testing.T) {
	runs := 0
	// Every other run of a candidate reproduces: never in 3 of 3.
	run := func(_ context.Context, f *scenario.File) (bool, error) {
		runs++
		return runs%2 == 1, nil
	}
	f := busy(t)
	out, err := Shrink(context.Background(), f, run, Options{Tries: 3})
	require.NoError(t, err)
	assert.Equal(t, 2, out.Reproduced, "the starting scenario's replays: 1, 3 of 3")
	assert.Zero(t, out.Kept)
	assert.Equal(t, f, out.Minimal)
}

// A starting scenario that fails in none of its replays is not shrunk:
// nothing it would write would be about a run that happened.
func TestShrinkRefusesWhatDoesNotReproduce(t *testing.T) {
	runs := 0
	run := func(_ context.Context, f *scenario.File) (bool, error) {
		runs++
		return false, fmt.Errorf("steps landed: 0, expected >= 1")
	}
	var log bytes.Buffer
	out, err := Shrink(context.Background(), busy(t), run, Options{Tries: 3, Log: &log})
	var refused *NotReproduced
	require.ErrorAs(t, err, &refused)
	assert.Equal(t, 3, runs, "every replay ran, no candidate")
	assert.Nil(t, out.Minimal)
	assert.Zero(t, out.Tried)
	assert.Equal(t, 3, out.Replays)
	assert.Contains(t, err.Error(), "reproduced in 0 of 3 replays (the first: steps landed: 0, expected >= 1): a step likely missed the moment")
	assert.NotContains(t, err.Error(), "\n")
	assert.Contains(t, log.String(), "replay 3 of 3: steps landed: 0")
}

func TestShrinkStopsAtItsBudget(t *testing.T) {
	run := func(ctx context.Context, f *scenario.File) (bool, error) {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		return breaks(f), nil
	}
	out, err := Shrink(context.Background(), busy(t), run, Options{Tries: 3, Budget: 100 * time.Millisecond})
	require.NoError(t, err, "running out of budget is not an error: the smallest so far is the result")
	assert.True(t, out.OutOfBudget)
	assert.True(t, breaks(out.Minimal), "whatever it kept still fails")
}

func TestShrinkKeepsTheClientsTheTimelineNames(t *testing.T) {
	f := busy(t)
	f.Timeline = f.Timeline[:2]
	f.Timeline[1].Target, f.Timeline[1].When.Client = "c4", "c4"
	f.Timeline[1].At = dur(2 * time.Second)
	// While a step names c4, five clients is the fewest; a runner that
	// fails without c4's step lets it go, and then the clients.
	needsC4 := func(_ context.Context, f *scenario.File) (bool, error) {
		return slices.ContainsFunc(f.Timeline, func(s scenario.Step) bool { return s.Target == "c4" }), nil
	}
	out, err := Shrink(context.Background(), f, needsC4, Options{Tries: 1})
	require.NoError(t, err)
	require.Len(t, out.Minimal.Timeline, 1)
	assert.Equal(t, 5, out.Minimal.Clients)
	assert.Equal(t, "c4", out.Minimal.Timeline[0].Target)
}
