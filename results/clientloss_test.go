package results

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

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
		{"none", []history.Event{grant(0, 0, "a")}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, libraryLosses(&history.History{Events: c.events}))
		})
	}
}
