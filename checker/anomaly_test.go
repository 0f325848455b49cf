package checker

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFirstAnomalyMs(t *testing.T) {
	const t0 = int64(1e12)
	tests := []struct {
		name   string
		fenced bool
		result Result
		want   *float64
	}{
		{name: "no check failed", result: Result{}, want: nil},
		{name: "a fenced overlap is a notice, not an anomaly", fenced: true, result: Result{Checks: Checks{DoubleOwnership: DoubleOwnership{
			Windows: 1, UnsafeWrites: 1, List: []Window{{Start: t0 + 5e6, Unsafe: 1}}}}}, want: nil},
		{name: "the earliest of several checks", result: Result{Checks: Checks{
			LeaseSafety: LeaseSafety{Violations: 1, Evidence: []LeaseViolation{{Later: Grant{OK: t0 + 9e6}}}},
			DoubleOwnership: DoubleOwnership{Windows: 2, UnsafeWrites: 1, List: []Window{
				{Start: t0 + 3e6}, {Start: t0 + 7e6, Unsafe: 1}}},
			Resource: ResourceSafety{Valid: true, StaleWritesRefused: 1, Anomalies: []ResourceAnomaly{{Kind: StaleWriteRefused, Time: t0 + 1e6}}},
		}}, want: ptr(7.0)},
		{name: "an illegal linearizability segment", result: Result{Checks: Checks{Linearizability: Linearizability{
			Result: NotLinearizable, Window: &Interval{Start: t0 + 1e6, End: t0 + 2.5e6}}}}, want: ptr(2.5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.result
			r.Span = Interval{Start: t0, End: t0 + 1e9}
			if r.Checks.Linearizability.Result == "" {
				r.Checks.Linearizability.Result = Linearizable
			}
			if r.Checks.LeaseSafety.Violations == 0 {
				r.Checks.LeaseSafety.Valid = true
			}
			r.Checks.Fencing.Valid, r.Checks.Resource.Valid = true, true
			assert.Equal(t, tt.want, firstAnomalyMs(&r, tt.fenced))
		})
	}
}

func ptr(f float64) *float64 { return &f }
