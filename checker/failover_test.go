package checker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/history"
)

// A promotion between two grants that got the same INCR fence explains the
// duplicate: INCR after failover. The same duplicate with no promotion in
// between has no such cause.
func TestFenceWentBackAfterFailover(t *testing.T) {
	tests := []struct {
		name     string
		switchAt float64 // < 0: no promotion
		cause    string
	}{
		{"promotion between the grants", 40, "INCR after failover: redis-1 was promoted between the two grants"},
		{"no promotion", -1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder("unfenced").
				Nemesis(0, history.NemRole, "redis-0", "", "master").
				Acquire(0, 10, 11, 5)
			if tt.switchAt >= 0 {
				b.Nemesis(tt.switchAt, history.NemSwitchMaster, "redis-1", "", "redis-0 -> redis-1").
					Nemesis(tt.switchAt-1, history.NemRole, "redis-1", "", "master")
			}
			r := check(t, b.Acquire(1, 50, 51, 5))

			assert.Equal(t, 1, r.Checks.LeaseSafety.Violations, "c1 was granted while c0's lease was live")
			assert.Equal(t, 1, r.Checks.Fencing.Duplicates)
			require.Len(t, r.Checks.Fencing.Anomalies, 1)
			if tt.cause == "" {
				assert.Empty(t, r.Checks.Fencing.Anomalies[0].Cause)
				return
			}
			assert.Contains(t, r.Checks.Fencing.Anomalies[0].Cause, tt.cause)
			assert.Contains(t, r.Reason, "(duplicate, INCR after failover")
			assert.Contains(t, r.Reason, "after the failover to redis-1", "the lease violation names the promotion")
			var kinds []string
			for _, f := range r.Faults {
				kinds = append(kinds, f.Kind+" "+f.Target)
			}
			assert.Equal(t, []string{"switch-master redis-1"}, kinds, "a promotion is a fault; a role report is not")
		})
	}
}

// An acquire the service refused outright (NOREPLICAS) is counted apart
// from one that found the lock busy.
func TestRefusedAcquiresAreCountedApart(t *testing.T) {
	b := newBuilder("unfenced").
		Acquire(0, 0, 1, 1).
		AcquireFail(1, 2, 3).
		AcquireFail(2, 4, 5)
	b.Events[len(b.Events)-1].Error = history.RefusedPrefix + "NOREPLICAS Not enough good replicas to write."
	r := check(t, b.Release(0, 10, 11))
	assert.Equal(t, 1, r.Checks.Liveness.AcquireFailed, "the lock was busy once")
	assert.Equal(t, 1, r.Checks.Liveness.AcquireRefused, "the service refused once")
	assert.Equal(t, Valid, r.Valid)
}
