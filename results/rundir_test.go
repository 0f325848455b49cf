package results

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewRunDir(t *testing.T) {
	out := filepath.Join(t.TempDir(), "store")
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

	first, err := NewRunDir(out, "redis", "unfenced", now)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(out, "20250102-030405-redis-unfenced"), first)
	assert.DirExists(t, filepath.Join(first, LogsDir))

	second, err := NewRunDir(out, "redis", "unfenced", now)
	require.NoError(t, err)
	assert.Equal(t, first+"-2", second)
	third, err := NewRunDir(out, "redis", "unfenced", now)
	require.NoError(t, err)
	assert.Equal(t, first+"-3", third)

	target, err := os.Readlink(filepath.Join(out, LatestLink))
	require.NoError(t, err)
	assert.Equal(t, "20250102-030405-redis-unfenced-3", target, "latest is relative and names the newest run")

	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	assert.Len(t, entries, 4, "three runs and latest, no temporary links left")
}

func TestNewRunDirKeepsNamesInsideOut(t *testing.T) {
	out := t.TempDir()
	dir, err := NewRunDir(out, "../redis", "a/b", time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(out, "20250102-030405-.._redis-a_b"), dir)
}

func TestNewRunDirLatestIsAFolder(t *testing.T) {
	out := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(out, LatestLink, "x"), 0o755))
	_, err := NewRunDir(out, "redis", "fenced", time.Now())
	assert.ErrorContains(t, err, "is it a folder rather than a symlink?")
}

func TestOpenRunDir(t *testing.T) {
	out := t.TempDir()
	dir, err := NewRunDir(out, "redis", "fenced", time.Now())
	require.NoError(t, err)
	latest := filepath.Join(out, LatestLink)
	file := filepath.Join(out, "notes.txt")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))

	hint := "; pass a directory written by lockcheck run, such as store/latest"
	for _, tc := range []struct {
		name, path, wantErr string
	}{
		{"no history yet", latest, latest + " is not a lockcheck run directory (no history.jsonl)" + hint},
		{"missing", filepath.Join(out, "foo"), filepath.Join(out, "foo") + " is not a lockcheck run directory (it does not exist)" + hint},
		{"a file", file, file + " is not a lockcheck run directory (it is a file, not a directory)" + hint},
		{"the output folder", out, out + " is not a lockcheck run directory (no history.jsonl)" + hint},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := OpenRunDir(tc.path)
			assert.EqualError(t, err, tc.wantErr)
		})
	}

	require.NoError(t, os.WriteFile(filepath.Join(dir, HistoryFile), []byte("{}\n"), 0o644))
	got, err := OpenRunDir(latest)
	require.NoError(t, err)
	want, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	assert.Equal(t, want, got, "latest resolves to the run directory")
}
