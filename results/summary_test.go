package results

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/lockcheck/lockcheck/checker"
)

func TestSummary(t *testing.T) {
	dir := filepath.Join("store", "20250102-030405-redis-unfenced")
	for _, tc := range []struct {
		name  string
		res   func() *checker.Result
		lines []string
	}{
		{"good", goodResult, []string{
			"redis/correct/unfenced, nemesis pause-holder, seed 1: 24 history events",
			"verdict: true. No anomaly in 3 grants.",
			"lease safety      ok (0 violations)",
			"double ownership  ok (0 windows)",
			"resource          ok (0 lost updates, 0 stale writes accepted, 0 stale writes refused)",
			"fencing           ok (0 regressions, 0 duplicates)",
			"linearizability   ok (8 operations in 1 segment)",
			"liveness          ok (3 grants (2.1/s), longest stall 380 ms, acquire p50 0 ms, p99 0 ms)",
		}},
		{"bad", func() *checker.Result { return badResult(plain) }, []string{
			"lease safety      FAILED (1 violation)",
			"double ownership  FAILED (1 window, 80 ms total, max 80 ms, 1 unsafe write)",
			"resource          FAILED (1 lost update, 0 stale writes accepted, 1 stale write refused)",
			"linearizability   UNKNOWN (8 operations in 1 segment)",
			"liveness          FAILED (3 grants (2.1/s), longest stall 400 ms, acquire p50 0 ms, p99 0 ms, orphaned 1 time (until the end of the run))",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			Summary(&buf, dir, sampleHistory(plain, "unfenced"), tc.res())
			lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			assert.Len(t, lines, 9, "a title, the verdict, one line per check and the report")
			for _, want := range tc.lines {
				assert.Contains(t, lines, want)
			}
			assert.Equal(t, "report: "+filepath.Join(dir, "report.html"), lines[len(lines)-1], "the report's path is the last line")
		})
	}
}
