package results

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
)

// BenchmarkCheckRun checks a real run's directory (LOCKCHECK_BENCH_RUN:
// its history.jsonl and resource.jsonl) as `lockcheck check` does, every
// check and every file written, for the side-by-side measure against
// porcupine alone (checker's BenchmarkPorcupineAlone).
func BenchmarkCheckRun(b *testing.B) {
	src := os.Getenv("LOCKCHECK_BENCH_RUN")
	if src == "" {
		b.Skip("set LOCKCHECK_BENCH_RUN to a run directory")
	}
	dir := b.TempDir()
	for _, name := range []string{HistoryFile, ResourceFile} {
		data, err := os.ReadFile(filepath.Join(src, name))
		require.NoError(b, err)
		require.NoError(b, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	for b.Loop() {
		_, _, err := CheckDir(dir, checker.Options{})
		require.NoError(b, err)
	}
}
