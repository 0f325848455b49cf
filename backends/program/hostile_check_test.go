package program

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// client check fails every hostile program with the rule it broke, also
// one broken after a reply was taken (a duplicate reply) or in a field a
// decoder would have hidden, as a run records it (TestHostileProgramsAreReported).
func TestClientCheckNamesEveryHostileRule(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skip("no " + python)
	}
	cases := []struct{ mode, rule string }{
		{"dupreply", RuleReply},
		{"deleted1", RuleJSON},
		{"wrongtype", RuleReply},
		{"fpflood", RuleAimed},
		{"ttlmax", RuleRange},
		{"ttl584y", RuleRange},
		{"badutf8", RuleUTF8},
		{"surrogate", RuleUTF8},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			fails := conformance(t, []string{python, filepath.Join("testdata", "hostile.py"), c.mode}, nil).Check(context.Background())
			var rules []string
			for _, f := range fails {
				rules = append(rules, f.Rule)
			}
			assert.Contains(t, rules, c.rule, "%v", fails)
		})
	}
}
