package workloads

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/history"
)

// A library's renewal is an extend of its process only where the extend
// can begin when the renewal was sent: a renewal sent just before a pause
// of its holder and read after it is an extend invoked at its sent_ns;
// one whose start is unknown, or that overlaps another operation of the
// process, is a lock-renewed observation, which moves no lease.
func TestRenewalPlacement(t *testing.T) {
	const key, token = "k0", "t1"
	ms := int64(time.Millisecond)
	tests := []struct {
		name string
		// before records the process's events after its grant (at
		// base, 1 s ago); sent is the renewal's sent_ns after base (0:
		// none).
		before func(c *Client, base int64)
		sent   int64
		// extendAt is where the extend is invoked; 0: an observation
		// with detail why, or nothing at all when why is empty too.
		extendAt int64
		why      string
	}{
		{name: "sent before a pause and read after it: an extend from sent_ns", sent: 200 * ms, extendAt: 200 * ms},
		{name: "sent after the read completed: an extend from sent_ns",
			before: func(c *Client, base int64) {
				c.emitEvent(history.Event{Time: base + 10*ms, Process: c.process, Type: history.Invoke, F: history.FRead, Key: key})
				c.emitEvent(history.Event{Time: base + 20*ms, Process: c.process, Type: history.OK, F: history.FRead, Key: key})
			},
			sent: 150 * ms, extendAt: 150 * ms},
		{name: "no sent_ns: an observation", sent: 0, why: "no sent_ns"},
		{name: "sent while a write is in flight: an observation",
			before: func(c *Client, base int64) {
				c.emitEvent(history.Event{Time: base + 100*ms, Process: c.process, Type: history.Invoke, F: history.FWrite, Key: key})
			},
			sent: 150 * ms, why: "during another operation of the process, sent 8"},
		{name: "sent before the read that completed since: an observation",
			before: func(c *Client, base int64) {
				c.emitEvent(history.Event{Time: base + 100*ms, Process: c.process, Type: history.Invoke, F: history.FRead, Key: key})
				c.emitEvent(history.Event{Time: base + 300*ms, Process: c.process, Type: history.OK, F: history.FRead, Key: key})
			},
			sent: 200 * ms, why: "during another operation"},
		{name: "sent_ns before the grant (another clock): an observation", sent: -5 * ms, why: "before the grant"},
		{name: "sent_ns in the future: an observation", sent: 10 * time.Hour.Nanoseconds(), why: "in the future"},
		{name: "a renewal of a grant released since: nothing",
			before: func(c *Client, base int64) {
				c.emitEvent(history.Event{Time: base + 100*ms, Process: c.process, Type: history.Invoke, F: history.FRelease, Key: key})
			},
			sent: 50 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var events []history.Event
			c := &Client{process: 3, emit: func(e history.Event) { events = append(events, e) }}
			base := history.Now() - int64(time.Second)
			c.emitEvent(history.Event{Time: base - ms, Process: c.process, Type: history.Invoke, F: history.FAcquire, Key: key})
			c.emitEvent(history.Event{Time: base, Process: c.process, Type: history.OK, F: history.FAcquire, Key: key, Value: &history.Value{Token: token, TTLms: 300}})
			if tt.before != nil {
				tt.before(c, base)
			}
			recorded := len(events)
			var sent int64
			if tt.sent != 0 {
				sent = base + tt.sent
			}
			read := time.Now()
			c.report(backends.Report{Key: key, Token: token, TTL: 300 * time.Millisecond, Sent: sent, At: read})
			got := events[recorded:]
			switch {
			case tt.extendAt != 0:
				require.Len(t, got, 2)
				assert.Equal(t, history.Event{Time: base + tt.extendAt, Process: 3, Type: history.Invoke, F: history.FExtend, Key: key,
					Value: &history.Value{Token: token, TTLms: 300, Detail: RenewedByLibrary}}, got[0])
				assert.Equal(t, history.OK, got[1].Type)
				// The read's moment on the history's clock is Now less the
				// time since it, as the client works it out; the same sum
				// here lands a few hundred nanoseconds later or earlier,
				// so the bound allows the two conversions' jitter.
				jitter := int64(time.Millisecond)
				assert.GreaterOrEqual(t, got[1].Time, history.Now()-int64(time.Since(read))-jitter, "the extend completes when it was read")
				assert.LessOrEqual(t, got[1].Time, history.Now(), "the extend completes when it was read, not later")
			case tt.why != "":
				require.Len(t, got, 1)
				e := got[0]
				assert.Equal(t, history.Nemesis, e.Process)
				assert.Equal(t, history.NemLockRenewed, e.F)
				assert.Equal(t, history.Info, e.Type)
				assert.Equal(t, "c3", e.Value.Target)
				assert.Equal(t, token, e.Value.Token)
				assert.Equal(t, int64(300), e.Value.TTLms)
				assert.Contains(t, e.Value.Detail, tt.why)
				assert.True(t, history.VerbOf(e.F).ObservesOnly(), "an observation draws nothing on a lane")
			default:
				assert.Empty(t, got)
			}
		})
	}
}
