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
	dirs, soaks, err := FindMergeable([]string{stores[2], stores[0], stores[1]})
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
	dirs, _, err := FindMergeable(stores)
	require.NoError(t, err)

	_, _, err = MergeComparisons(t.TempDir(), []string{dirs[0], dirs[0]}, nil, time.Now())
	assert.ErrorContains(t, err, "is in both", "a shard merged twice")

	other, err := ReadComparison(dirs[1])
	require.NoError(t, err)
	other.Seed = 4
	require.NoError(t, WriteComparison(dirs[1], other))
	_, _, err = MergeComparisons(t.TempDir(), dirs, nil, time.Now())
	assert.ErrorContains(t, err, "share --seed")

	_, _, err = FindMergeable([]string{t.TempDir()})
	assert.ErrorContains(t, err, "holds no comparison and no soak")
}
