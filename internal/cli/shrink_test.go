package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/scenario"
)

func TestShrinkFailOnly(t *testing.T) {
	repro := &scenario.File{Name: "repro-run-1", Expect: scenario.Expect{Verdict: "false", Fail: []string{"lease_safety", "fencing"}}}
	tests := []struct {
		name    string
		checks  []string
		want    []string
		wantErr string
	}{
		{"every check it expects", nil, []string{"lease_safety", "fencing"}, ""},
		{"the broken lock alone", []string{"lease_safety"}, []string{"lease_safety"}, ""},
		{"a check it does not expect to fail", []string{"resource"}, nil,
			"--fail resource: repro-run-1 does not expect resource to fail (it expects lease_safety, fencing); name some of those"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := failOnly(repro, tt.checks)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.Expect.Fail)
			assert.Equal(t, []string{"lease_safety", "fencing"}, repro.Expect.Fail, "the scenario read is left as it was")
		})
	}
}
