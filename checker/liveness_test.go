package checker

import (
	"testing"

	"github.com/lockcheck/lockcheck/history"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stuckAfterKill is the setnx-expire variant's failure: c3 is killed between
// SETNX and EXPIRE at 4.2s, the key never expires, and c0 and c1 try in
// vain until the run ends at 20s.
func stuckAfterKill() *builder {
	b := newBuilder("fenced")
	v := int64(0)
	for ms := 0.0; ms <= 4000; ms += 100 {
		b.Cycle(0, ms, v, v+1, "")
		b.AcquireFail(1, ms+3, ms+4)
		v++
	}
	b.Add(4150, 3, history.Invoke, history.FAcquire, nil)
	b.Nemesis(4199, history.NemFailpoint, "c3", "setnx-expire-gap", "")
	b.Nemesis(4200, history.NemKill, "c3", "setnx-expire-gap", "SIGKILL")
	for ms := 4300.0; ms < 20000; ms += 100 {
		b.AcquireFail(0, ms, ms+1).AcquireFail(1, ms+50, ms+51)
	}
	b.Nemesis(20000, history.NemRunEnd, "", "", "")
	return b.Nemesis(20001, history.NemInspect, "redis-0", "", "lock-0 has no TTL (PTTL -1)")
}

func TestLivenessStuckAfterKillAtFailpoint(t *testing.T) {
	r := check(t, stuckAfterKill())
	l := r.Checks.Liveness
	assert.Equal(t, 41, l.Grants)
	assert.True(t, l.StuckUntilEnd)
	require.NotNil(t, l.Stall)
	assert.Equal(t, Interval{Start: at(4001), End: at(20000)}, *l.Stall)
	assert.InDelta(t, 15999, l.LongestStallMs, 1e-9)
	assert.Equal(t, lockKey, l.StallKey)
	assert.Equal(t, "c3 was killed between SETNX and EXPIRE at 4.20s; the lock key was left with no TTL and "+
		"nobody got the lock for the remaining 15.8s; at the end of the run: lock-0 has no TTL (PTTL -1)", l.StallReason)
	assert.Equal(t, 1, l.AcquireUnknown, "the killed acquire")
	assert.Equal(t, 41+41+2*157+1, l.AcquireAttempts)
	assert.Equal(t, 41+2*157, l.AcquireFailed)

	// Nobody can hold the key after c3's acquire: had EXPIRE run, its
	// 100 ms lease would have ended by 4.30s; the clients are refused to
	// the end of the run, 15.6s, far past the 1.2s orphan bound.
	assert.Equal(t, Invalid, r.Valid, "a lock nobody can take again is broken")
	assert.Equal(t, 1, l.Orphaned)
	require.Len(t, l.Orphans, 1)
	o := l.Orphans[0]
	assert.Equal(t, at(4300), o.From)
	assert.Equal(t, at(20000), o.To)
	assert.True(t, o.UntilEnd)
	assert.Equal(t, 2*157-1, o.Refused, "c0's refusal at 4.30s overlaps the end of c3's claim")
	assert.InDelta(t, 1200, o.BoundMs, 1e-9)
	require.NotNil(t, o.Holder)
	assert.Equal(t, history.Process(3), *o.Holder)
	assert.Equal(t, "nobody held lock-0 from 4.30s to the end of the run, yet 313 acquires were refused over 15.6s; "+
		"c3 was killed between SETNX and EXPIRE at 4.20s, before its acquire returned: the lock key was left with no TTL; "+
		"had it been granted its 100 ms lease, that would have ended by 4.30s; at the end of the run: lock-0 has no TTL (PTTL -1)", o.Reason)
	assert.Equal(t, "The lock was orphaned: "+o.Reason+".", r.Reason)
	assert.Equal(t, StatusFailed, l.Judge(JudgeContext{}).Status)
	require.Len(t, r.Faults, 1, "the failpoint, run-end and inspect events are no faults")
	assert.Equal(t, Fault{Kind: history.NemKill, Target: "c3", Start: at(4200), End: at(4200), Failpoint: "setnx-expire-gap", Index: r.Faults[0].Index}, r.Faults[0])
}

func TestLivenessStatistics(t *testing.T) {
	b := newBuilder("fenced")
	b.Cycle(0, 0, 0, 1, "").Cycle(1, 10, 1, 2, "").Cycle(2, 20, 2, 3, "")
	b.Acquire(0, 30, 35, 4).Release(0, 36, 37)
	b.AcquireFail(1, 31, 32).Op(2, history.FAcquire, 33, nil, 34, history.Info, nil)
	b.Nemesis(1000, history.NemRunEnd, "", "", "")
	l := check(t, b).Checks.Liveness
	assert.Equal(t, 4, l.Grants)
	assert.InDelta(t, 4/1.0, l.GrantsPerSec, 1e-9)
	assert.Equal(t, 1.0, l.AcquireP50Ms)
	assert.Equal(t, 5.0, l.AcquireP99Ms)
	assert.Equal(t, 5.0, l.AcquireMaxMs)
	assert.Equal(t, 6, l.AcquireAttempts)
	assert.Equal(t, 1, l.AcquireFailed)
	assert.Equal(t, 1, l.AcquireUnknown)
	// Nobody tried after 35 ms, so the quiet end of the run is no stall.
	assert.False(t, l.StuckUntilEnd)
	assert.Equal(t, Interval{Start: at(21), End: at(35)}, *l.Stall)
	assert.Empty(t, l.StallReason)
}

func TestStallReason(t *testing.T) {
	tests := []struct {
		name   string
		b      *builder
		stuck  bool
		reason string
	}{
		{
			name: "a stall that ended while the holder was paused",
			b: pausedHolder("fenced").Nemesis(310, history.NemRunEnd, "", "", "").
				Nemesis(311, history.NemInspect, "redis-0", "", "lock-0 is free"),
			reason: "nobody was granted lock-0 for 110 ms from 0.00s; c0's 100 ms lease ended at 0.10s while c0 was paused",
		},
		{
			name: "a stall that ended during a fault of the lock service",
			b: newBuilder("fenced").Cycle(0, 0, 0, 1, "").Nemesis(15, history.NemPause, "redis-0", "", "").
				Acquire(1, 20, 80, 2).Release(1, 85, 86).Nemesis(90, history.NemResume, "redis-0", "", ""),
			reason: "nobody was granted lock-0 for 79 ms from 0.00s while redis-0 was paused",
		},
		{
			name: "a stall that ended after a kill at a failpoint leaves out the end-of-run inspection",
			b: newBuilder("fenced").Cycle(0, 0, 0, 1, "").Add(20, 3, history.Invoke, history.FAcquire, nil).
				Nemesis(21, history.NemKill, "c3", "setnx-expire-gap", "").AcquireFail(1, 30, 31).
				Acquire(1, 200, 210, 2).Release(1, 220, 221).
				Nemesis(300, history.NemRunEnd, "", "", "").Nemesis(301, history.NemInspect, "redis-0", "", "lock-0 is free"),
			reason: "c3 was killed between SETNX and EXPIRE at 0.02s; the lock key was left with no TTL and nobody got the lock for 189 ms",
		},
		{
			name:   "a stall that ended with no fault in force has no reason",
			b:      newBuilder("fenced").Cycle(0, 0, 0, 1, "").Acquire(1, 20, 80, 2).Release(1, 85, 86),
			reason: "",
		},
		{
			name: "a lock stuck until the end says what the nemesis inspected",
			b: newBuilder("fenced").Acquire(0, 0, 1, 1).Nemesis(5, history.NemKill, "c0", "", "").AcquireFail(1, 10, 11).
				AcquireFail(1, 250, 251).AcquireFail(1, 1500, 1501).
				Nemesis(1600, history.NemRunEnd, "", "", "").Nemesis(1601, history.NemInspect, "redis-0", "", "lock-0 has PTTL -1"),
			stuck:  true,
			reason: "nobody got the lock from 0.00s to the end of the run although clients kept trying; at the end of the run: lock-0 has PTTL -1",
		},
		{
			name: "a lock held until the end by a holder that is still there is not stuck",
			b: newBuilder("fenced").Acquire(0, 0, 1, 1).AcquireFail(1, 10, 11).AcquireFail(1, 1250, 1251).
				Nemesis(1300, history.NemRunEnd, "", "", "").Nemesis(1301, history.NemInspect, "redis-0", "", "lock-0 has PTTL 900"),
			reason: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := check(t, tt.b).Checks.Liveness
			require.NotNil(t, l.Stall)
			assert.Equal(t, tt.stuck, l.StuckUntilEnd)
			assert.Equal(t, tt.reason, l.StallReason)
		})
	}
}

// A run that ends (or is interrupted) a moment after the last grant is not
// a stuck lock: a working lock is granted again within a lease.
func TestLivenessShortFinalGapIsNotStuck(t *testing.T) {
	b := newBuilder("unfenced")
	b.Cycle(0, 100, 1, 1, "0-1")
	b.AcquireFail(1, 130, 131)
	b.Nemesis(150, history.NemRunEnd, "", "", "interrupted")
	l := check(t, b).Checks.Liveness
	assert.False(t, l.StuckUntilEnd, "a 40 ms gap under a 100 ms lease is not stuck")
}

// sessionGrant adds a grant of a lock bound to a server session (no TTL).
func sessionGrant(b *builder, p history.Process, inv, ok float64) *builder {
	return b.Op(p, history.FAcquire, inv, nil, ok, history.OK, &history.Value{Token: p.String(), Session: "pg-0/" + p.String()})
}

// refusals adds busy refusals of p every 100 ms from from to to.
func refusals(b *builder, p history.Process, from, to float64) *builder {
	for ms := from; ms < to; ms += 100 {
		b.AcquireFail(p, ms, ms+1)
	}
	return b
}

// TestOrphanedLock: the lock is orphaned only when nobody can hold it and
// clients are refused past the bound (2 x TTL + 1 s; 1 s without a TTL).
func TestOrphanedLock(t *testing.T) {
	tests := []struct {
		name     string
		b        func() *builder
		orphaned bool
		from, to float64
		untilEnd bool
		reason   string
	}{
		{
			name: "an advisory lock left on a pooled connection: the release freed nothing",
			b: func() *builder {
				b := newBuilder("unfenced")
				b.Config.TTLms = 0
				sessionGrant(b, 0, 0, 1)
				b.Op(0, history.FRelease, 10, &history.Value{Token: "c0"}, 11, history.OK, &history.Value{Accepted: history.Bool(false)})
				refusals(b, 1, 20, 2500)
				return b.Nemesis(2600, history.NemRunEnd, "", "", "")
			},
			orphaned: true, from: 11, to: 2600, untilEnd: true,
			reason: "nobody held lock-0 from 0.01s to the end of the run, yet 25 acquires were refused over 2.4s; the last to hold it, c0, released it at 0.01s " +
				"and the service answered that it held nothing to release (accepted: false)",
		},
		{
			name: "a paused holder keeps a session lock",
			b: func() *builder {
				b := newBuilder("unfenced")
				b.Config.TTLms = 0
				sessionGrant(b, 0, 0, 10).Nemesis(20, history.NemPause, "c0", "", "")
				refusals(b, 1, 30, 19030)
				return b.Nemesis(19500, history.NemRunEnd, "", "", "")
			},
		},
		{
			name: "a paused holder whose lease is live holds the lock",
			b: func() *builder {
				b := newBuilder("unfenced")
				b.Acquire(0, 0, 1, -1).Nemesis(2, history.NemPause, "c0", "", "")
				refusals(b, 1, 20, 90)
				return b.Nemesis(95, history.NemResume, "c0", "", "").Release(0, 96, 97).Acquire(1, 100, 101, -1).Nemesis(200, history.NemRunEnd, "", "", "")
			},
		},
		{
			name: "a paused holder's TTL lease ends whatever it believes",
			b: func() *builder {
				b := newBuilder("unfenced")
				b.Op(0, history.FAcquire, 0, &history.Value{TTLms: 500}, 10, history.OK, &history.Value{Token: "c0", TTLms: 500})
				b.Nemesis(500, history.NemPause, "c0", "", "")
				refusals(b, 1, 30, 19030)
				return b.Nemesis(19500, history.NemRunEnd, "", "", "")
			},
			orphaned: true, from: 1000, to: 19500, untilEnd: true,
			reason: "nobody held lock-0 from 1.00s to the end of the run, yet 180 acquires were refused over 17.9s; " +
				"the last to hold it was c0; c0's 500 ms lease ended at 1.00s while c0 was paused",
		},
		{
			name: "a slow service that refuses while the holder works",
			b: func() *builder {
				b := newBuilder("unfenced")
				b.Config.TTLms = 0
				sessionGrant(b, 0, 0, 1).Release(0, 2990, 3000)
				for ms := 10.0; ms < 2300; ms += 700 {
					b.AcquireFail(1, ms, ms+650)
				}
				return b.Acquire(1, 3010, 3011, -1).Release(1, 3020, 3021).Nemesis(3100, history.NemRunEnd, "", "", "")
			},
		},
		{
			name: "a short gap before the end of the run, the lock free",
			b: func() *builder {
				b := newBuilder("unfenced")
				b.Config.TTLms = 0
				sessionGrant(b, 0, 0, 1).Release(0, 10, 11)
				b.AcquireFail(1, 12, 13).AcquireFail(1, 40, 41)
				return b.Nemesis(60, history.NemRunEnd, "", "", "")
			},
		},
		{
			name: "a session whose client gave up behind a partition lives until the heal",
			b: func() *builder {
				b := newBuilder("unfenced")
				b.Config.TTLms = 0
				sessionGrant(b, 0, 0, 1)
				b.Nemesis(5, history.NemPartition, "c0", "", "")
				b.Op(0, history.FWrite, 10, &history.Value{Value: history.Int64(1), Read: history.Int64(0), Req: "0-1"}, 1010, history.Info, nil)
				refusals(b, 1, 20, 3000)
				b.Nemesis(2900, history.NemHeal, "c0", "", "")
				return b.Acquire(1, 3000, 3001, -1).Release(1, 3010, 3011).Nemesis(3100, history.NemRunEnd, "", "", "")
			},
		},
		{
			name: "a killed holder's lease runs out within the bound",
			b: func() *builder {
				b := newBuilder("unfenced")
				b.Acquire(0, 0, 1, -1).Nemesis(5, history.NemKill, "c0", "", "")
				refusals(b, 1, 20, 1150)
				return b.Acquire(1, 1200, 1201, -1).Release(1, 1210, 1211).Nemesis(1300, history.NemRunEnd, "", "", "")
			},
		},
		{
			name: "a killed holder's key that outlives its lease by more than the bound",
			b: func() *builder {
				b := newBuilder("unfenced")
				b.Acquire(0, 0, 1, -1).Nemesis(5, history.NemKill, "c0", "", "")
				refusals(b, 1, 20, 1550)
				return b.Acquire(1, 1600, 1601, -1).Release(1, 1610, 1611).Nemesis(1700, history.NemRunEnd, "", "", "")
			},
			orphaned: true, from: 105, to: 1600,
			reason: "nobody held lock-0 from 0.10s to 1.60s, yet 15 acquires were refused over 1.4s; the last to hold it, c0, was killed at 0.01s; its 100 ms lease was over by 0.10s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := check(t, tt.b())
			l := r.Checks.Liveness
			if !tt.orphaned {
				assert.Zero(t, l.Orphaned, "%+v", l.Orphans)
				assert.False(t, l.StuckUntilEnd)
				assert.Equal(t, StatusOK, l.Judge(JudgeContext{}).Status)
				assert.NotEqual(t, Invalid, r.Valid, r.Reason)
				return
			}
			require.Equal(t, 1, l.Orphaned)
			o := l.Orphans[0]
			assert.Equal(t, at(tt.from), o.From)
			assert.Equal(t, at(tt.to), o.To)
			assert.Equal(t, tt.untilEnd, o.UntilEnd)
			assert.Equal(t, tt.untilEnd, l.StuckUntilEnd)
			assert.Equal(t, tt.reason, o.Reason)
			assert.Equal(t, Invalid, r.Valid)
			assert.Contains(t, r.Reason, "The lock was orphaned: "+tt.reason)
			require.NotNil(t, r.FirstAnomalyMs)
			assert.InDelta(t, float64(o.FirstRefused-r.Span.Start)/1e6, *r.FirstAnomalyMs, 1e-9)
		})
	}
}

// TestStallCountsFromTheFirstAcquire: a stall is measured while clients
// tried, so a client's start-up before it first asks for the key is none
// (a JVM client's first acquire 2.1 s after a ZooKeeper role event).
func TestStallCountsFromTheFirstAcquire(t *testing.T) {
	b := newBuilder("unfenced")
	b.Nemesis(30, history.NemRole, "zk-1", "", "leader")
	b.Acquire(0, 2100, 2150, -1).Release(0, 2200, 2201)
	b.AcquireFail(1, 2180, 2181).Acquire(1, 2210, 2400, -1).Release(1, 2500, 2501)
	b.Nemesis(2600, history.NemRunEnd, "", "", "")
	l := check(t, b).Checks.Liveness
	require.NotNil(t, l.Stall)
	assert.Equal(t, Interval{Start: at(2150), End: at(2400)}, *l.Stall, "the gap between the grants, not the start-up")
	assert.InDelta(t, 250, l.LongestStallMs, 1e-9)
}
