package checker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/history"
)

// A run with a nemesis is judged by whether its faults landed: none landed
// is unknown, never a pass; one landed is enough; a history from before
// landing events keeps its verdict.
func TestNoFaultLandedIsUnknown(t *testing.T) {
	step := func(b *builder, ms float64, n int, fault, target string, landed bool, why string) {
		b.Add(ms, history.Nemesis, history.Info, history.NemPause, &history.Value{Target: target, Step: history.Int(n)})
		b.Add(ms+50, history.Nemesis, history.Info, history.NemResume, &history.Value{Target: target, Step: history.Int(n)})
		b.Add(ms+51, history.Nemesis, history.Info, history.NemLanding, &history.Value{Step: history.Int(n), Fault: fault, Landed: history.Bool(landed), Detail: why})
	}
	clean := func(nemesis ...string) *builder {
		b := newBuilder("fenced").Cycle(0, 10, 1, 1, "r1").Cycle(1, 300, 2, 2, "r2")
		b.Config.Nemesis = nemesis
		return b
	}
	tests := []struct {
		name     string
		build    func() *builder
		verdict  Validity
		injected int
		landed   int
		reason   string
	}{
		{"no nemesis", func() *builder { return clean() }, Valid, 0, 0, ""},
		{"one of two landed", func() *builder {
			b := clean("pause-node")
			step(b, 100, 1, "pause-node", "redis-0", false, "redis-0 was stopped 10ms of the 1s asked: the run ended first")
			step(b, 200, 2, "pause-node", "redis-0", true, "redis-0 was stopped for 1s")
			return b
		}, Valid, 2, 1, ""},
		{"none landed", func() *builder {
			b := clean("clock-pause")
			step(b, 100, 1, "clock-pause", "redlock-1", false, "the minority came back 1.4s after the kill; c0's lease had 600ms left")
			return b
		}, Unknown, 1, 0, "No fault landed: the one injected missed its precondition"},
		{"nemesis but no step ran", func() *builder { return clean("pause-node") }, Unknown, 0, 0, "the nemesis was asked for pause-node but injected no fault"},
		{"a history from before landing events", func() *builder {
			b := clean("pause-node")
			b.Nemesis(100, history.NemPause, "redis-0", "", "")
			b.Nemesis(150, history.NemResume, "redis-0", "", "")
			return b
		}, Valid, 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := check(t, tt.build())
			assert.Equal(t, tt.verdict, r.Valid, r.Reason)
			assert.Equal(t, tt.injected, r.FaultLanding.Injected)
			assert.Equal(t, tt.landed, r.FaultLanding.Landed)
			if tt.reason != "" {
				assert.Contains(t, r.Reason, tt.reason)
			}
		})
	}
}

// Each fault interval carries its step's landing.
func TestFaultsCarryTheirStepsLanding(t *testing.T) {
	b := newBuilder("fenced").Cycle(0, 10, 1, 1, "r1")
	b.Config.Nemesis = []string{"pause-node"}
	b.Add(100, history.Nemesis, history.Info, history.NemPause, &history.Value{Target: "redis-0", Step: history.Int(1)})
	b.Add(150, history.Nemesis, history.Info, history.NemResume, &history.Value{Target: "redis-0", Step: history.Int(1)})
	b.Add(151, history.Nemesis, history.Info, history.NemLanding, &history.Value{Step: history.Int(1), Fault: "pause-node", Landed: history.Bool(true), Detail: "redis-0 was stopped for 50ms"})
	b.Add(200, history.Nemesis, history.Info, history.NemSwitchMaster, &history.Value{Target: "redis-1"})
	r := check(t, b)
	require.Len(t, r.Faults, 2)
	assert.True(t, r.Faults[0].Landed)
	assert.Equal(t, "redis-0 was stopped for 50ms", r.Faults[0].Why)
	assert.Equal(t, history.Int(1), r.Faults[0].Step)
	assert.True(t, r.Faults[1].Landed, "a promotion the service made was observed")
}

// An anomaly that happened under a fault says the run tested what the
// fault aims at: the verdict never adds that no fault landed, whatever its
// landing says (a fault an older lockcheck called missed when the end of
// the run cut it short).
func TestAnAnomalyUnderAFaultIsNoMiss(t *testing.T) {
	b := newBuilder("unfenced")
	b.Config.Nemesis = []string{"partition-minority"}
	b.Add(10, history.Nemesis, history.Info, history.NemPartition, &history.Value{Target: "redis-0", Step: history.Int(1)})
	b.Acquire(0, 20, 21, -1).Acquire(1, 30, 31, -1).Release(0, 40, 41).Release(1, 50, 51)
	b.Add(90, history.Nemesis, history.Info, history.NemHeal, &history.Value{Target: "redis-0", Step: history.Int(1)})
	b.Add(91, history.Nemesis, history.Info, history.NemLanding, &history.Value{Step: history.Int(1), Fault: "partition-minority", Landed: history.Bool(false),
		Detail: "redis-0 with c1 was cut off 18.97s of the 20s asked: the run ended first"})
	r := check(t, b)
	assert.Equal(t, Invalid, r.Valid)
	assert.Equal(t, 1, r.Checks.LeaseSafety.Violations)
	assert.NotContains(t, r.Reason, "No fault landed")
	assert.Equal(t, 0, r.FaultLanding.Landed, "the landing is as recorded")
}
