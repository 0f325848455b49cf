package scenario

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/harness"
)

// Scenarios run the harness, which starts workers and etcd members by
// running its own executable: in tests that is the test binary, which
// becomes one here.
func TestMain(m *testing.M) {
	if harness.RunWorkerFromEnv() || catalog.RunNodeFromEnv() {
		return
	}
	os.Exit(m.Run())
}

const demo4 = `name: my-incident
backend: redis
variant: correct
workload: unfenced
ttl: 300ms
clients: 2
time_limit: 3s
timeline:
  - at: 500ms
    when: {client: c0, reaches: before-write}
    do: pause
    target: c0
    for: 900ms
expect:
  verdict: false
  fail: [resource]
  counts:
    resource.lost_updates: ">= 1"
`

func TestParseReadsAScenario(t *testing.T) {
	f, err := Parse("incident.yaml", []byte(demo4))
	require.NoError(t, err)
	assert.Equal(t, "my-incident", f.Name)
	assert.Equal(t, "false", f.Expect.Verdict, "an unquoted false is read as the verdict false")
	acts := f.Actions()
	require.Len(t, acts, 1)
	assert.Equal(t, "pause", acts[0].Do)
	assert.Equal(t, "c0", acts[0].When.Client)
}

func TestParseErrorsNameTheLineAndField(t *testing.T) {
	tests := []struct {
		name, from, to, want string
	}{
		{"misspelled field", "ttl: 300ms", "tll: 300ms", "line 5: field tll not found"},
		{"unknown node", "target: c0", "target: redis-9", `line 12: target: unknown node or client "redis-9"`},
		{"unknown client in when", "{client: c0,", "{client: c7,", `line 10: when: unknown client "c7"`},
		{"unknown moment", "reaches: before-write", "reaches: lunch", `line 10: when: unknown moment "lunch"`},
		{"unknown action", "do: pause", "do: explode", `line 11: do: unknown action "explode"`},
		{"bad duration", "for: 900ms", "for: soon", `line 13: "soon" is not a duration`},
		{"unknown backend", "backend: redis", "backend: zookeeper", `line 2: backend: unknown backend "zookeeper"`},
		{"unknown check", "fail: [resource]", "fail: [vibes]", `unknown check "vibes"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(replaceOnce(t, demo4, tt.from, tt.to))
			_, err := Parse("incident.yaml", data)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "incident.yaml: ")
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func replaceOnce(t *testing.T, s, from, to string) string {
	t.Helper()
	i := strings.Index(s, from)
	require.GreaterOrEqual(t, i, 0, "fixture lacks %q", from)
	return s[:i] + to + s[i+len(from):]
}

// The catalogue is lockcheck's regression suite: every shipped scenario
// runs against real servers and must show what it expects.
func TestCatalogue(t *testing.T) {
	all, err := Catalogue()
	require.NoError(t, err)
	require.NotEmpty(t, all)
	out := t.TempDir()
	for _, f := range all {
		t.Run(f.Name, func(t *testing.T) {
			if _, err := harness.Preflight(f.Config(out, catalog.Programs{}, nil)); err != nil {
				t.Fatalf("cannot run %s here: %v (run scripts/setup)", f.Name, err)
			}
			o, err := Run(context.Background(), f, out, catalog.Programs{}, nil)
			require.NoError(t, err)
			for _, m := range o.Comparison.Mismatches {
				t.Errorf("%s: expected %s, observed %s (run directory %s)", m.What, m.Expected, m.Observed, o.Dir)
			}
			assert.NotEmpty(t, o.Comparison.Lines, "a scenario that expects nothing tests nothing")
		})
	}
}
