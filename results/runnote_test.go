package results

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
)

// TestCutShortRunSaysSoEverywhere: results.json, the summary, junit.xml,
// the report and the index all say that a run was interrupted or is
// incomplete.
func TestCutShortRunSaysSoEverywhere(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(*checker.Result)
		want    string
		jsonKey string
	}{
		{"interrupted", func(r *checker.Result) {
			r.Interrupted, r.InterruptedBy = true, "recording history.jsonl failed: no space left on device"
		}, "interrupted before its time limit (recording history.jsonl failed", `"interrupted": true`},
		{"incomplete", func(r *checker.Result) { r.Incomplete = true }, "This run is incomplete", `"incomplete": true`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := goodResult()
			res.Valid = checker.Unknown
			tc.mutate(res)
			h := sampleHistory(plain, "unfenced")
			store := t.TempDir()
			dir := filepath.Join(store, "run")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, WriteAll(dir, h, res))
			for _, file := range []string{ResultsFile, JUnitFile, ReportFile} {
				b, err := os.ReadFile(filepath.Join(dir, file))
				require.NoError(t, err)
				if file == ResultsFile {
					assert.Contains(t, string(b), tc.jsonKey)
					continue
				}
				assert.Contains(t, string(b), tc.want, file)
			}
			var sum bytes.Buffer
			Summary(&sum, dir, h, res)
			assert.Contains(t, sum.String(), tc.want)
			r, err := ReadResults(dir)
			require.NoError(t, err)
			assert.Contains(t, runEntry(dir, "run", "").Summary, tc.want)
			var cell Cell
			cell.Ran(r)
			assert.Contains(t, cell.Reason, tc.want)
		})
	}
}
