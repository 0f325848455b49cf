package results

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

func TestLibraryLosses(t *testing.T) {
	ms := int64(time.Millisecond)
	grant := func(at int64, p history.Process, token string) history.Event {
		return history.Event{Time: at, Process: p, Type: history.OK, F: history.FAcquire, Key: "k", Value: &history.Value{Token: token}}
	}
	lost := func(at int64, target, token string) history.Event {
		return history.Event{Time: at, Process: history.Nemesis, Type: history.Info, F: history.NemLockLost, Key: "k",
			Value: &history.Value{Target: target, Token: token, Detail: "session expired"}}
	}
	cases := []struct {
		name   string
		events []history.Event
		want   []string
	}{
		{"late", []history.Event{grant(0, 0, "a"), grant(600*ms, 1, "b"), lost(1400*ms, "c0", "a")},
			[]string{"c0's library said it lost k (session expired) 800 ms after c1 was granted it"}},
		{"in time", []history.Event{grant(0, 0, "a"), lost(400*ms, "c0", "a"), grant(600*ms, 1, "b")},
			[]string{"c0's library said it lost k (session expired) 200 ms before c1 was granted it"}},
		{"no other grant", []history.Event{grant(0, 0, "a"), lost(400*ms, "c0", "a")},
			[]string{"c0's library said it lost k (session expired) before any other client was granted it"}},
		{"a grant the history does not hold", []history.Event{grant(0, 0, "a"), lost(400*ms, "c0", "z")},
			[]string{"c0's library said it lost k (session expired), for a grant the history does not hold"}},
		{"none", []history.Event{grant(0, 0, "a")}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var lines []string
			for _, l := range libraryLosses(&history.History{Events: c.events}) {
				lines = append(lines, l.Line())
			}
			assert.Equal(t, c.want, lines)
		})
	}
}

// TestLibraryLossesInResults: results.json says how late each lock-lost
// event came, in ms after the next grant to another client.
func TestLibraryLossesInResults(t *testing.T) {
	ms := int64(time.Millisecond)
	h := &history.History{Events: []history.Event{
		{Time: 0, Process: 0, Type: history.OK, F: history.FAcquire, Key: "k", Value: &history.Value{Token: "a"}},
		{Time: 600 * ms, Process: 1, Type: history.OK, F: history.FAcquire, Key: "k", Value: &history.Value{Token: "b"}},
		{Time: 1400 * ms, Process: history.Nemesis, Type: history.Info, F: history.NemLockLost, Key: "k",
			Value: &history.Value{Target: "c0", Token: "a", Detail: "session expired"}},
	}}
	b, err := json.Marshal(newResults(h, &checker.Result{}).LibraryLosses)
	require.NoError(t, err)
	assert.JSONEq(t, `[{"key":"k","client":"c0","known":true,"detail":"session expired","at_ms":1400,"granted_to":1,"late_ms":800}]`, string(b))
}
