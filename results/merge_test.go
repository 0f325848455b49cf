package results

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/internal/buildinfo"
)

// shardsOf writes the comparison of comparisonWithRuns as n shards, each in
// its own store, as n machines would; it returns the stores and the whole.
func shardsOf(t *testing.T, n int) ([]string, *Comparison) {
	src, whole := comparisonWithRuns(t)
	// A server's socket left in a run's node directory is not copied.
	sock, err := net.Listen("unix", filepath.Join(src, "run-fenced", ".s.sock"))
	require.NoError(t, err)
	t.Cleanup(func() { sock.Close() })
	var stores []string
	for i := 1; i <= n; i++ {
		store := t.TempDir()
		dir, err := NewCompareDir(store, time.Unix(int64(i), 0))
		require.NoError(t, err)
		part := *whole
		part.CommandLine = []string{"lockcheck", "compare", "--shard", strconv.Itoa(i) + "/" + strconv.Itoa(n), "--seed", "3"}
		part.Cells = nil
		for j, c := range whole.Cells {
			if j%n == i-1 {
				if c.Dir != "" {
					require.NoError(t, copyTree(filepath.Join(src, c.Dir), filepath.Join(dir, c.Dir)))
				}
				part.Cells = append(part.Cells, c)
			}
		}
		require.NoError(t, WriteComparison(dir, &part))
		stores = append(stores, store)
	}
	return stores, whole
}

func TestMergeComparisons(t *testing.T) {
	stores, whole := shardsOf(t, 3)
	dirs, soaks, _, err := FindMergeable([]string{stores[2], stores[0], stores[1]})
	assert.Empty(t, soaks)
	require.NoError(t, err)
	out := t.TempDir()
	dir, merged, err := MergeComparisons(out, dirs, []string{"lockcheck", "merge"}, time.Now())
	require.NoError(t, err)

	require.Len(t, merged.Cells, len(whole.Cells))
	for i, c := range merged.Cells {
		w := whole.Cells[i]
		assert.Equal(t, []any{w.Backend, w.Variant, w.Workload, w.Nemesis, w.Status, w.Valid, w.Counts},
			[]any{c.Backend, c.Variant, c.Workload, c.Nemesis, c.Status, c.Valid, c.Counts}, "cell %d in the matrix's order", i)
		if c.Dir != "" {
			assert.FileExists(t, filepath.Join(dir, c.Dir, ResultsFile), "the cell's run directory is copied in")
		}
	}
	back, err := ReadComparison(dir)
	require.NoError(t, err)
	assert.Equal(t, merged.Cells, back.Cells)
	assert.FileExists(t, filepath.Join(dir, JUnitFile))
	page, err := os.ReadFile(filepath.Join(dir, CompareReport))
	require.NoError(t, err)
	assert.Contains(t, string(page), `<a href="s2of3-run-unfenced/report.html">`)
	index, err := os.ReadFile(filepath.Join(out, IndexFile))
	require.NoError(t, err)
	assert.Contains(t, string(index), filepath.Base(dir))
}

func TestMergeRefuses(t *testing.T) {
	stores, _ := shardsOf(t, 2)
	dirs, _, _, err := FindMergeable(stores)
	require.NoError(t, err)

	_, _, err = MergeComparisons(t.TempDir(), []string{dirs[0], dirs[0]}, nil, time.Now())
	assert.ErrorContains(t, err, "is in both", "a shard merged twice")

	other, err := ReadComparison(dirs[1])
	require.NoError(t, err)
	other.Seed = 4
	require.NoError(t, WriteComparison(dirs[1], other))
	_, _, err = MergeComparisons(t.TempDir(), dirs, nil, time.Now())
	assert.ErrorContains(t, err, "share --seed")

	_, _, _, err = FindMergeable([]string{t.TempDir()})
	assert.ErrorContains(t, err, "holds no comparison, soak or sweep")
}

// withBuild rewrites a comparison folder's compare.json as if a build of
// lockcheck at revision rev had written it.
func withBuild(t *testing.T, dir, rev string) {
	t.Helper()
	c, err := ReadComparison(dir)
	require.NoError(t, err)
	clean := false
	c.Lockcheck = buildinfo.Info{Version: "v0.0.0-20261202010109-" + rev[:12], Revision: rev, Modified: &clean, Go: "go1.26.8"}
	require.NoError(t, WriteComparison(dir, c))
}

func TestMergeSaysWhenShardsCameFromDifferentBuilds(t *testing.T) {
	revA, revB := "aaaaaaaaaaaa1111111111111111111111111111", "bbbbbbbbbbbb2222222222222222222222222222"
	tests := []struct {
		name      string
		revisions []string
		builds    [][]string // the parts of each build; none when one build made them all
	}{
		{"one build", []string{revA, revA}, nil},
		{"two builds", []string{revA, revB}, [][]string{{"s1of2"}, {"s2of2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stores, _ := shardsOf(t, 2)
			dirs, _, _, err := FindMergeable(stores)
			require.NoError(t, err)
			for i, d := range dirs {
				withBuild(t, d, tt.revisions[i])
			}
			dir, merged, err := MergeComparisons(t.TempDir(), dirs, nil, time.Now())
			require.NoError(t, err)
			var parts [][]string
			for _, b := range merged.Builds {
				parts = append(parts, b.Parts)
			}
			assert.Equal(t, tt.builds, parts)
			back, err := ReadComparison(dir)
			require.NoError(t, err)
			assert.Equal(t, merged.Builds, back.Builds, "compare.json keeps the builds")
			note := BuildsNote("comparisons", merged.Builds)
			if tt.builds == nil {
				assert.Empty(t, note)
				return
			}
			assert.Equal(t, "the merged comparisons came from different builds of lockcheck, so a verdict that differs between them may be lockcheck's change, not the lock's: s1of2 from revision aaaaaaaaaaaa; s2of2 from revision bbbbbbbbbbbb", note)
		})
	}
}

func TestBuildsNoteWithoutRevisions(t *testing.T) {
	devel := buildinfo.Info{Version: "(devel)", Revision: buildinfo.Unknown, Go: "go1.26.8"}
	groups := groupBuilds([]string{"s1of2", "s2of2"}, []buildinfo.Info{devel, devel})
	assert.Len(t, groups, 2, "two builds that recorded no revision cannot be told to be one")
	assert.Contains(t, BuildsNote("soaks", groups), "the merged soaks came from builds of lockcheck that recorded no revision")
}
