package checker

import (
	"fmt"
	"strings"
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
			r := checkRun(t, tt.b(), tt.nemesis)
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

// checkRun checks b as a run's record (its header names when it started),
// asked for the faults nemesis.
func checkRun(t *testing.T, b *builder, nemesis []string) *Result {
	t.Helper()
	b.Config.Nemesis = nemesis
	h := b.Build(t)
	h.Header.Started = "2026-11-30T05:00:00Z" // recorded by lockcheck run
	return Check(h, nil, Options{})
}

// TestHandWrittenHistoryIsNotARun: a history with no start time (written
// from an incident's account) is neither incomplete nor asked to test.
func TestHandWrittenHistoryIsNotARun(t *testing.T) {
	r := check(t, newBuilder("fenced").Acquire(0, 0, 1, 1).Release(0, 2, 3))
	assert.False(t, r.Incomplete)
	assert.Empty(t, r.UnknownReasons)
	assert.Equal(t, Valid, r.Valid)
}

// unanswered adds n acquires of new processes from first on, every 10 ms,
// that end in an error (info), each retiring its process.
func unanswered(b *builder, first history.Process, from float64, n int, err string) *builder {
	for i := range n {
		ms := from + float64(10*i)
		b.Add(ms, first+history.Process(i), history.Invoke, history.FAcquire, nil)
		b.Events = append(b.Events, history.Event{Time: at(ms + 1), Process: first + history.Process(i), Type: history.Info, F: history.FAcquire, Key: lockKey, Error: err})
	}
	return b
}

// TestMostlyUnansweredOrNoWriteAccepted: a run that had no write accepted,
// or whose acquires mostly got no answer while no fault was in force, is
// unknown, with that reason first; errors a fault explains, and refusals,
// are no such thing.
func TestMostlyUnansweredOrNoWriteAccepted(t *testing.T) {
	const pgbouncer = `ERROR: prepared statement "stmtcache_5c8e2a1f" already exists (SQLSTATE 42P05)`
	tests := []struct {
		name    string
		b       func() *builder
		nemesis []string
		verdict Validity
		lead    string // how the reason starts
		reason  string // in the reason
	}{
		{
			name: "every write refused",
			b: func() *builder {
				b := newBuilder("fenced")
				for i := range 3 {
					ms := float64(20 * i)
					b.Acquire(history.Process(i), ms, ms+1, -1).Read(history.Process(i), ms+2, ms+3, 0).
						Write(history.Process(i), ms+4, ms+5, 1, 0, -1, fmt.Sprint(i), history.OK, false, 0).Release(history.Process(i), ms+6, ms+7)
				}
				return b.Nemesis(200, history.NemRunEnd, "", "", "")
			},
			verdict: Unknown,
			reason:  "No write was accepted: the resource refused all 3 writes, so nothing the lock protected was tested (a fenced resource refuses a write with no fence or a stale one: a lock that hands out none needs --fence-source resource).",
		},
		{
			name: "most acquires ended in an error",
			b: func() *builder {
				b := chain(newBuilder("fenced"), 3)
				return unanswered(b, 10, 40, 30, pgbouncer).Nemesis(400, history.NemRunEnd, "", "", "")
			},
			verdict: Unknown,
			lead:    "Most acquires got no answer, so the run tested almost nothing: 30 of the 33 made while no fault was in force ended in an error or an unknown outcome, most often (30 times, first at 0.04s) " + pgbouncer + ".",
		},
		{
			name: "errors of one kind with different numbers count together",
			b: func() *builder {
				b := chain(newBuilder("fenced"), 3)
				unanswered(b, 10, 40, 4, "dial tcp 127.0.0.1:40001: connect: connection refused")
				unanswered(b, 20, 100, 4, "dial tcp 127.0.0.1:40517: connect: connection refused")
				return b.Nemesis(400, history.NemRunEnd, "", "", "")
			},
			verdict: Unknown,
			lead:    "Most acquires got no answer, so the run tested almost nothing: 8 of the 11 made while no fault was in force ended in an error or an unknown outcome, most often (8 times, first at 0.04s) dial tcp 127.0.0.1:40001: connect: connection refused.",
		},
		{
			name: "errors while a node was down are the fault's",
			b: func() *builder {
				b := chain(newBuilder("fenced"), 3).Nemesis(35, history.NemKill, "redis-0", "", "")
				return unanswered(b, 10, 40, 30, "connection refused").Nemesis(400, history.NemStart, "redis-0", "", "").
					Cycle(0, 410, 3, 4, "").Nemesis(500, history.NemRunEnd, "", "", "")
			},
			verdict: Valid,
		},
		{
			name: "refusals are answers",
			b: func() *builder {
				b := chain(newBuilder("fenced"), 3)
				for i := range 30 {
					ms := 40 + float64(10*i)
					b.Op(1, history.FAcquire, ms, nil, ms+1, history.Fail, &history.Value{Refused: true})
				}
				return b.Nemesis(400, history.NemRunEnd, "", "", "")
			},
			verdict: Valid,
		},
		{
			name: "a fault that missed because the acquires failed says so",
			b: func() *builder {
				b := chain(newBuilder("fenced"), 3)
				unanswered(b, 10, 40, 30, pgbouncer)
				b.Add(350, history.Nemesis, history.Info, history.NemLanding, &history.Value{Step: history.Int(1), Fault: "pause-holder", Landed: history.Bool(false),
					Detail: "no client held the lock and reached its write within 2s"})
				return b.Nemesis(400, history.NemRunEnd, "", "", "")
			},
			nemesis: []string{"pause-holder"},
			verdict: Unknown,
			lead:    "Most acquires got no answer, so the run tested almost nothing: 30 of the 33",
			reason:  "No fault landed, which the unanswered acquires explain: a lock that is hardly ever granted gives no fault its moment (the first missed: pause-holder: no client held the lock and reached its write within 2s).",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checkRun(t, tt.b(), tt.nemesis)
			assert.Equal(t, tt.verdict, r.Valid, r.Reason)
			if tt.verdict == Valid {
				assert.Empty(t, r.UnknownReasons)
				return
			}
			if tt.lead != "" {
				assert.True(t, strings.HasPrefix(r.Reason, tt.lead), "the reason starts with it: %s", r.Reason)
				assert.True(t, strings.HasPrefix(r.UnknownReasons[0], unansweredLead))
			}
			assert.Contains(t, r.Reason, tt.reason)
		})
	}
}

// The errors of unanswered acquires are counted by kind in results.json.
func TestAcquireErrors(t *testing.T) {
	b := chain(newBuilder("fenced"), 3)
	unanswered(b, 10, 40, 3, "i/o timeout")
	unanswered(b, 20, 100, 5, "connection reset by peer")
	l := check(t, b).Checks.Liveness
	assert.Equal(t, 11, l.AcquireNoFault)
	assert.Equal(t, 8, l.AcquireNoFaultUnanswered)
	assert.Equal(t, []AcquireError{{Error: "connection reset by peer", Count: 5, FirstMs: 101}, {Error: "i/o timeout", Count: 3, FirstMs: 41}}, l.AcquireErrors)
}
