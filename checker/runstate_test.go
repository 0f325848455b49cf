package checker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/history"
)

// TestRunOutcomeMakesTheVerdictUnknown: a run that was interrupted, cut
// short, or tested nothing never passes; a safety failure still fails.
func TestRunOutcomeMakesTheVerdictUnknown(t *testing.T) {
	const end = 200
	tests := []struct {
		name        string
		b           func() *builder
		nemesis     []string
		verdict     Validity
		interrupted bool
		incomplete  bool
		reason      string // in the reason
	}{
		{
			name:    "finished run that tested something passes",
			b:       func() *builder { return chain(newBuilder("fenced"), 3).Nemesis(end, history.NemRunEnd, "", "", "") },
			verdict: Valid,
		},
		{
			name: "interrupted",
			b: func() *builder {
				return chain(newBuilder("fenced"), 3).Nemesis(end, history.NemRunEnd, "", "", "interrupted")
			},
			verdict:     Unknown,
			interrupted: true,
			reason:      "The run was interrupted before its time limit",
		},
		{
			name: "interrupted by a failed recording",
			b: func() *builder {
				return chain(newBuilder("fenced"), 3).Nemesis(end, history.NemRunEnd, "", "", "interrupted: recording resource.jsonl failed: no space left on device")
			},
			verdict:     Unknown,
			interrupted: true,
			reason:      "(recording resource.jsonl failed: no space left on device)",
		},
		{
			name:       "no run-end",
			b:          func() *builder { return chain(newBuilder("fenced"), 3) },
			verdict:    Unknown,
			incomplete: true,
			reason:     "without a run-end event",
		},
		{
			name: "interrupted with a safety failure is false",
			b: func() *builder {
				return pausedHolder("unfenced").Nemesis(end+200, history.NemRunEnd, "", "", "interrupted")
			},
			verdict:     Invalid,
			interrupted: true,
			reason:      "The run was interrupted",
		},
		{
			name: "no grant",
			b: func() *builder {
				return newBuilder("fenced").AcquireFail(0, 0, 1).AcquireFail(1, 2, 3).Nemesis(end, history.NemRunEnd, "", "", "")
			},
			verdict: Unknown,
			reason:  "No client was ever granted the lock (2 acquires: 2 refused as busy",
		},
		{
			name: "no write",
			b: func() *builder {
				return newBuilder("fenced").Acquire(0, 0, 1, 1).Release(0, 2, 3).Nemesis(end, history.NemRunEnd, "", "", "")
			},
			verdict: Unknown,
			reason:  "No client wrote to the resource",
		},
		{
			name:    "a nemesis that injected nothing",
			b:       func() *builder { return chain(newBuilder("fenced"), 3).Nemesis(end, history.NemRunEnd, "", "", "") },
			nemesis: []string{"pause-holder"},
			verdict: Unknown,
			reason:  "No fault landed: the nemesis was asked for pause-holder but injected no fault",
		},
		{
			name: "a nemesis that injected a fault",
			b: func() *builder {
				return chain(newBuilder("fenced"), 3).Nemesis(5, history.NemPause, "c0", "", "").
					Nemesis(6, history.NemResume, "c0", "", "").Nemesis(end, history.NemRunEnd, "", "", "")
			},
			nemesis: []string{"pause-holder"},
			verdict: Valid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.b()
			b.Config.Nemesis = tt.nemesis
			h := b.Build(t)
			h.Header.Started = "2026-11-30T05:00:00Z" // recorded by lockcheck run
			r := Check(h, nil, Options{})
			assert.Equal(t, tt.verdict, r.Valid, r.Reason)
			assert.Equal(t, tt.interrupted, r.Interrupted)
			assert.Equal(t, tt.incomplete, r.Incomplete)
			assert.Contains(t, r.Reason, tt.reason)
			if tt.verdict == Valid {
				assert.Empty(t, r.UnknownReasons)
			} else {
				require.NotEmpty(t, r.UnknownReasons)
			}
		})
	}
}

// TestHandWrittenHistoryIsNotARun: a history with no start time (written
// from an incident's account) is neither incomplete nor asked to test.
func TestHandWrittenHistoryIsNotARun(t *testing.T) {
	r := check(t, newBuilder("fenced").Acquire(0, 0, 1, 1).Release(0, 2, 3))
	assert.False(t, r.Incomplete)
	assert.Empty(t, r.UnknownReasons)
	assert.Equal(t, Valid, r.Valid)
}
