package checker

import (
	"testing"

	"github.com/lockcheck/lockcheck/history"
	"github.com/stretchr/testify/assert"
)

func TestFencing(t *testing.T) {
	tests := []struct {
		name        string
		b           *builder
		checked     bool
		duplicates  int
		regressions int
		kinds       []string
	}{
		{
			name:    "fences rise with every grant",
			b:       newBuilder("fenced").Cycle(0, 0, 0, 1, "a").Cycle(1, 10, 1, 2, "b").Cycle(2, 20, 2, 7, "c"),
			checked: true,
		},
		{
			name: "no fences, nothing to check",
			b:    newBuilder("unfenced").Cycle(0, 0, 0, -1, "a").Cycle(1, 10, 1, -1, "b"),
		},
		{
			name: "a counter that went back after a failover hands out a fence twice",
			b: newBuilder("fenced").Cycle(0, 0, 0, 5, "a").Cycle(1, 10, 1, 6, "b").
				Cycle(2, 20, 2, 6, "c").Cycle(0, 30, 3, 6, "d"),
			checked:     true,
			duplicates:  2,
			regressions: 0,
			kinds:       []string{FenceDuplicate, FenceDuplicate},
		},
		{
			name:        "a lower fence after a grant that certainly came first",
			b:           newBuilder("fenced").Cycle(0, 0, 0, 5, "a").Cycle(1, 10, 1, 3, "b").Cycle(2, 20, 2, 8, "c"),
			checked:     true,
			regressions: 1,
			kinds:       []string{FenceRegression},
		},
		{
			name: "concurrent acquires may be granted in either fence order",
			b: newBuilder("fenced").Acquire(0, 0, 10, 5).Acquire(1, 2, 8, 4).
				Release(1, 11, 12).Release(0, 13, 14),
			checked: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := check(t, tt.b).Checks.Fencing
			assert.Equal(t, tt.checked, f.Checked)
			assert.Equal(t, tt.duplicates, f.Duplicates)
			assert.Equal(t, tt.regressions, f.Regressions)
			assert.Equal(t, tt.duplicates == 0 && tt.regressions == 0, f.Valid)
			var kinds []string
			for _, a := range f.Anomalies {
				kinds = append(kinds, a.Kind)
			}
			assert.Equal(t, tt.kinds, kinds)
		})
	}
}

func TestFenceRegressionEvidence(t *testing.T) {
	b := newBuilder("fenced").Cycle(0, 0, 0, 5, "a").Cycle(1, 10, 1, 7, "b").Cycle(2, 20, 2, 6, "c")
	r := check(t, b)
	f := r.Checks.Fencing
	if assert.Len(t, f.Anomalies, 1) {
		a := f.Anomalies[0]
		assert.Equal(t, history.Process(1), a.Earlier.Process, "paired with the highest fence before it")
		assert.Equal(t, history.Process(2), a.Later.Process)
	}
	assert.Equal(t, Invalid, r.Valid)
	assert.Equal(t, "c2 got fence 6 for lock-0 at 0.02s after c1 had got fence 7 (regression); "+
		"the resource accepted c2's write with fence 6 after fence 7 (stale write).", r.Reason)
}
