package cli

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/internal/buildinfo"
	"github.com/lockcheck/lockcheck/results"
)

func TestVersion(t *testing.T) {
	cmd, flag := lockcheck("version"), lockcheck("--version")
	assert.Equal(t, exitValid, cmd.code, cmd.stderr)
	assert.Equal(t, exitValid, flag.code, flag.stderr)
	assert.Equal(t, cmd.stdout, flag.stdout, "lockcheck version and lockcheck --version print the same")
	assert.Equal(t, buildinfo.Current().String(), cmd.stdout)
	// go test records no VCS information: the revision is honestly unknown.
	assert.Regexp(t, `^lockcheck \S+\nrevision: \S+\nmodified: (true|false|unknown)\ngo: `+runtime.Version()+`\n$`, cmd.stdout)
}

// merge of two shards that came from different builds of lockcheck says so.
func TestMergeSaysShardsCameFromDifferentBuilds(t *testing.T) {
	clean := false
	var stores []string
	for i, rev := range []string{"aaaaaaaaaaaa1111111111111111111111111111", "bbbbbbbbbbbb2222222222222222222222222222"} {
		store := t.TempDir()
		dir, err := results.NewCompareDir(store, time.Unix(int64(i+1), 0))
		require.NoError(t, err)
		require.NoError(t, results.WriteComparison(dir, &results.Comparison{
			CommandLine: []string{"lockcheck", "compare", "--shard", fmt.Sprintf("%d/2", i+1), "--seed", "3"},
			Seed:        3, TimeLimitMs: 1000,
			Lockcheck: buildinfo.Info{Version: "v0.0.0-20261202010109-" + rev[:12], Revision: rev, Modified: &clean, Go: "go1.26.8"},
		}))
		stores = append(stores, store)
	}
	inv := lockcheck(append([]string{"merge", "--out", t.TempDir()}, stores...)...)
	assert.Equal(t, exitValid, inv.code, inv.stderr)
	assert.Contains(t, inv.stdout, "note: the merged comparisons came from different builds of lockcheck, so a verdict that differs between them may be lockcheck's change, not the lock's: s1of2 from revision aaaaaaaaaaaa; s2of2 from revision bbbbbbbbbbbb\n")
}
