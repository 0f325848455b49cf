package checker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/history"
)

// releaseOn adds a release that ran on server session on and reported
// released, as the postgres backend records it.
func releaseOn(b *builder, p history.Process, inv, ok float64, on string, released bool) *builder {
	return b.Op(p, history.FRelease, inv, &history.Value{Token: p.String()}, ok, history.OK, &history.Value{Accepted: history.Bool(released), Session: on})
}

// inspectHeld adds the end-of-run inspection naming the session that holds
// the lock.
func inspectHeld(b *builder, ms float64, session string) *builder {
	return b.Add(ms, history.Nemesis, history.Info, history.NemInspect, &history.Value{Target: lockKey, Session: session, Detail: lockKey + ": advisory lock held by server session " + session})
}

// TestSessionStory: the verdict names the server sessions when a release
// ran on another session than its grant, or a session still held the lock
// at the end when no client did (a pooler in transaction mode); a lock
// released where it was granted tells no such story.
func TestSessionStory(t *testing.T) {
	tests := []struct {
		name    string
		history func(b *builder)
		valid   Validity
		moved   int
		reason  []string
	}{
		{"straight to the server: released on the session of the grant", func(b *builder) {
			sessionAcquire(b, 0, 0, 1, "pg-0/10")
			releaseOn(b, 0, 100, 101, "pg-0/10", true)
			sessionAcquire(b, 1, 200, 201, "pg-0/11")
			releaseOn(b, 1, 300, 301, "pg-0/11", true)
			b.Add(400, history.Nemesis, history.Info, history.NemInspect, &history.Value{Target: lockKey, Detail: lockKey + ": free"})
		}, Valid, 0, nil},
		{"transaction pooling, simple protocol: a second client granted on the holder's session, the releases elsewhere", func(b *builder) {
			sessionAcquire(b, 0, 0, 1, "pg-0/4702")
			sessionAcquire(b, 2, 50, 51, "pg-0/4702")
			releaseOn(b, 0, 100, 101, "pg-0/4711", false)
			releaseOn(b, 2, 150, 151, "pg-0/4711", false)
			inspectHeld(b, 400, "pg-0/4702")
		}, Invalid, 2, []string{
			"c2 was granted lock-0 at 0.05s while c0's lease was certainly live, both on server session pg-0/4702",
			"c2 released lock-0 on server session pg-0/4711, but its grant was on pg-0/4702; pg-0/4702 still held it at the end (2 releases in all",
		}},
		{"transaction pooling: granted twice on one session, released once there, held at the end", func(b *builder) {
			sessionAcquire(b, 0, 0, 1, "pg-0/4702")
			sessionAcquire(b, 1, 50, 51, "pg-0/4702")
			releaseOn(b, 0, 100, 101, "pg-0/4702", true)
			releaseOn(b, 1, 150, 151, "pg-0/4711", false)
			inspectHeld(b, 400, "pg-0/4702")
		}, Invalid, 1, []string{
			"c1 released lock-0 on server session pg-0/4711, but its grant was on pg-0/4702; pg-0/4702 still held it at the end",
		}},
		{"transaction pooling, extended protocol: the release fails, the session keeps the lock", func(b *builder) {
			sessionAcquire(b, 0, 0, 1, "pg-0/4702")
			b.Op(0, history.FRelease, 100, &history.Value{Token: "c0"}, 101, history.Info, nil)
			b.Events[len(b.Events)-1].Error = `ERROR: prepared statement "stmtcache_1" does not exist (SQLSTATE 26000)`
			inspectHeld(b, 400, "pg-0/4702")
		}, Valid, 0, []string{
			`c0's release of lock-0 ended in an error (ERROR: prepared statement "stmtcache_1" does not exist (SQLSTATE 26000)), and pg-0/4702, the server session of its grant at 0.00s, still held it at the end`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder("unfenced")
			b.Config.TTLms = 500
			tt.history(b)
			r := check(t, b)
			assert.Equal(t, tt.valid, r.Valid, r.Reason)
			if tt.reason == nil {
				assert.Nil(t, r.Sessions)
				assert.NotContains(t, r.Reason, "server session")
				return
			}
			require.NotNil(t, r.Sessions)
			assert.Equal(t, tt.moved, r.Sessions.MovedReleases)
			require.Len(t, r.Sessions.Stranded, 1)
			assert.Equal(t, "pg-0/4702", r.Sessions.Stranded[0].Session)
			for _, want := range tt.reason {
				assert.Contains(t, r.Reason, want)
			}
		})
	}
}
