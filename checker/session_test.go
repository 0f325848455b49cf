package checker

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/lockcheck/lockcheck/history"
)

// sessionAcquire adds a grant bound to a server session, as the postgres
// backend records one: no TTL, the session in value.session.
func sessionAcquire(b *builder, p history.Process, inv, ok float64, session string) *builder {
	return b.Op(p, history.FAcquire, inv, nil, ok, history.OK, &history.Value{Token: session, Session: session})
}

func killSession(b *builder, ms float64, client, session, detail string) *builder {
	return b.Add(ms, history.Nemesis, history.Info, history.NemKillSession, &history.Value{Target: client, Session: session, Detail: detail})
}

// TestSessionLeases holds the rules of docs/history.md "Leases bound to a
// session": no TTL (the run's ttl_ms does not apply), and the lease ends at
// a release, a landed kill-session, a kill of the node or of the client,
// or its holder giving up.
func TestSessionLeases(t *testing.T) {
	tests := []struct {
		name       string
		history    func(b *builder)
		violations int
		windows    int
	}{
		{"the run's TTL does not end a session lease: a grant to another while held", func(b *builder) {
			sessionAcquire(b, 0, 0, 1, "pg-0/10")
			sessionAcquire(b, 1, 5000, 5001, "pg-0/11").Release(0, 6000, 6001)
		}, 1, 1},
		{"released, then granted: safe", func(b *builder) {
			sessionAcquire(b, 0, 0, 1, "pg-0/10").Release(0, 5000, 5001)
			sessionAcquire(b, 1, 5100, 5101, "pg-0/11")
		}, 0, 0},
		{"a grant after the holder's session was killed keeps PostgreSQL's promise; the killed client still believes", func(b *builder) {
			sessionAcquire(b, 0, 0, 1, "pg-0/10")
			killSession(b, 100, "c0", "pg-0/10", "")
			sessionAcquire(b, 1, 110, 111, "pg-0/11")
			b.Add(300, 0, history.Invoke, history.FRelease, &history.Value{Token: "pg-0/10"}).Add(301, 0, history.Info, history.FRelease, nil)
		}, 0, 1},
		{"a kill-session that missed ends nothing", func(b *builder) {
			sessionAcquire(b, 0, 0, 1, "pg-0/10")
			killSession(b, 100, "c0", "pg-0/10", "")
			killSession(b, 101, "c0", "pg-0/10", history.MissedPrefix+"the server found no backend pg-0/10")
			sessionAcquire(b, 1, 110, 111, "pg-0/11").Release(0, 300, 301)
		}, 1, 1},
		{"a kill of another session ends nothing", func(b *builder) {
			sessionAcquire(b, 0, 0, 1, "pg-0/10")
			killSession(b, 100, "c2", "pg-0/99", "")
			sessionAcquire(b, 1, 110, 111, "pg-0/11").Release(0, 300, 301)
		}, 1, 1},
		{"a kill of the node ends every session on it", func(b *builder) {
			sessionAcquire(b, 0, 0, 1, "pg-0/10")
			b.Nemesis(100, history.NemKill, "pg-0", "", "data kept")
			sessionAcquire(b, 1, 3000, 3001, "pg-0/11")
			b.Add(3100, 0, history.Invoke, history.FRelease, nil).Add(3101, 0, history.Info, history.FRelease, nil)
		}, 0, 1},
		{"a kill of the pooler the session's statements go through ends it", func(b *builder) {
			b.Op(0, history.FAcquire, 0, nil, 1, history.OK, &history.Value{Token: "pg-0/10", Session: "pg-0/10", Via: "pgbouncer-0"})
			b.Nemesis(100, history.NemKill, "pgbouncer-0", "", "data kept")
			sessionAcquire(b, 1, 3000, 3001, "pg-0/11")
			b.Add(3100, 0, history.Invoke, history.FRelease, nil).Add(3101, 0, history.Info, history.FRelease, nil)
		}, 0, 1},
		{"a kill of a pooler the session does not go through ends nothing", func(b *builder) {
			sessionAcquire(b, 0, 0, 1, "pg-0/10")
			b.Nemesis(100, history.NemKill, "pgbouncer-0", "", "data kept")
			sessionAcquire(b, 1, 3000, 3001, "pg-0/11")
			b.Add(3100, 0, history.Invoke, history.FRelease, nil).Add(3101, 0, history.Info, history.FRelease, nil)
		}, 1, 1},
		{"the holder giving up ends its session lease at the failed operation's invoke", func(b *builder) {
			sessionAcquire(b, 0, 0, 1, "pg-0/10")
			b.Add(50, 0, history.Invoke, history.FRead, nil).Add(1050, 0, history.Info, history.FRead, nil)
			sessionAcquire(b, 1, 1100, 1101, "pg-0/11")
		}, 0, 0},
		{"a release that found the lock gone does not end the lease: the session lost it", func(b *builder) {
			sessionAcquire(b, 0, 0, 1, "pg-0/10")
			releaseWith(b, 0, 100, 101, history.OK, history.Bool(false))
			sessionAcquire(b, 1, 200, 201, "pg-0/11")
		}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder("unfenced")
			b.Config.TTLms = 500
			tt.history(b)
			r := check(t, b)
			assert.Equal(t, tt.violations, r.Checks.LeaseSafety.Violations, "lease safety")
			assert.Equal(t, tt.windows, r.Checks.DoubleOwnership.Windows, "double ownership")
		})
	}
}

// TestWritesInLockTxCountAsFenced: the xact variant's writes commit with the
// lock, so double ownership is a notice, not a failure, in the unfenced
// workload.
func TestWritesInLockTxCountAsFenced(t *testing.T) {
	for _, inTx := range []bool{false, true} {
		b := newBuilder("unfenced")
		b.Config.TTLms = 0
		b.Config.WritesInLockTx = inTx
		sessionAcquire(b, 0, 0, 1, "pg-0/10")
		killSession(b, 10, "c0", "pg-0/10", "")
		sessionAcquire(b, 1, 20, 21, "pg-0/11")
		b.RMW(1, 30, 40, 0, 0, -1, "1-1").Release(1, 50, 51)
		b.Add(60, 0, history.Invoke, history.FRelease, nil).Add(61, 0, history.Info, history.FRelease, nil)
		r := check(t, b)
		assert.Equal(t, 1, r.Checks.DoubleOwnership.UnsafeWrites)
		if inTx {
			assert.Equal(t, Valid, r.Valid, r.Reason)
		} else {
			assert.Equal(t, Invalid, r.Valid, r.Reason)
		}
	}
}
