package results

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScanStore(t *testing.T) {
	store := t.TempDir()
	writeRun(t, store, "20250102-030405-redis-unfenced", storyHistory(plain))
	// A run killed before its check has a history and nothing else.
	unchecked := filepath.Join(store, "20250102-050000-redis-fenced")
	require.NoError(t, os.MkdirAll(unchecked, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(unchecked, HistoryFile), []byte("{}\n"), 0o644))
	cmpDir, cmp := comparisonWithRuns(t)
	require.NoError(t, WriteComparison(cmpDir, cmp))
	require.NoError(t, os.Rename(cmpDir, filepath.Join(store, "20250102-040000"+CompareSuffix)))
	require.NoError(t, os.Symlink("20250102-030405-redis-unfenced", filepath.Join(store, LatestLink)))
	require.NoError(t, os.Mkdir(filepath.Join(store, "not-a-run"), 0o755))

	entries, err := ScanStore(store)
	require.NoError(t, err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Kind+" "+e.Path+" "+e.Verdict)
	}
	assert.Equal(t, []string{
		"run 20250102-050000-redis-fenced not checked",
		"compare 20250102-040000-compare comparison",
		"run 20250102-040000-compare/run-fenced true",
		"run 20250102-040000-compare/run-unfenced false",
		"run 20250102-030405-redis-unfenced false",
	}, got, "newest first, the latest link and folders that are not runs left out")
	assert.Equal(t, "20250102-040000-compare/compare.html", entries[1].Href)
	assert.Equal(t, "4 cells: 1 true, 1 false, 1 skipped, 1 error.", entries[1].Summary)
	assert.Equal(t, "20250102-040000-compare", entries[2].Parent)
	assert.Equal(t, "20250102-050000-redis-fenced/", entries[0].Href, "an unchecked run links to its folder")
	assert.Equal(t, "redis/correct", entries[4].Backend)
	assert.Equal(t, "pause-holder", entries[4].Faults)
}

func TestStoreHandler(t *testing.T) {
	store := t.TempDir()
	writeRun(t, store, "20250102-030405-redis-unfenced", storyHistory(plain))
	// A folder name is text from the file system: it may hold markup too.
	writeRun(t, store, "20250102-030406-<b onmouseover=alert(1)>x", storyHistory(hostile{key: xss, target: xss, errText: xss}))
	// Symlinks inside the store that lead out of it, and latest, which
	// names a run beside it.
	require.NoError(t, os.Symlink("/etc", filepath.Join(store, "etclink")))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(store, "passwd")))
	require.NoError(t, os.Symlink("../..", filepath.Join(store, "20250102-030405-redis-unfenced", "up")))
	require.NoError(t, os.Symlink("20250102-030405-redis-unfenced", filepath.Join(store, LatestLink)))
	handler, err := StoreHandler(store)
	require.NoError(t, err)
	srv := httptest.NewServer(handler)
	defer srv.Close()

	get := func(method, path string) (int, string) {
		req, err := http.NewRequest(method, srv.URL+path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	for _, tc := range []struct {
		name, method, path string
		code               int
		contains           string
	}{
		{"index", http.MethodGet, "/", http.StatusOK, `<a href="20250102-030405-redis-unfenced/report.html">false</a>`},
		{"hostile folder escaped", http.MethodGet, "/", http.StatusOK, "20250102-030406-&lt;b onmouseover=alert(1)&gt;x"},
		{"hostile folder served", http.MethodGet, "/20250102-030406-%3Cb%20onmouseover=alert(1)%3Ex/report.html", http.StatusOK, "&lt;script&gt;"},
		{"a report", http.MethodGet, "/20250102-030405-redis-unfenced/report.html", http.StatusOK, `<svg xmlns="http://www.w3.org/2000/svg" id="timeline"`},
		{"the history", http.MethodGet, "/20250102-030405-redis-unfenced/history.jsonl", http.StatusOK, `"lockcheck_history":1`},
		{"outside the store", http.MethodGet, "/../../etc/passwd", http.StatusNotFound, ""},
		{"symlinked folder out of the store", http.MethodGet, "/etclink/passwd", http.StatusForbidden, ""},
		{"symlinked file out of the store", http.MethodGet, "/passwd", http.StatusForbidden, ""},
		{"relative symlink out of the store", http.MethodGet, "/20250102-030405-redis-unfenced/up/", http.StatusForbidden, ""},
		{"latest inside the store", http.MethodGet, "/latest/history.jsonl", http.StatusOK, `"lockcheck_history":1`},
		{"no favicon error", http.MethodGet, "/favicon.ico", http.StatusNoContent, ""},
		{"read only", http.MethodPost, "/", http.StatusMethodNotAllowed, "only reads"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(tc.method, tc.path)
			assert.Equal(t, tc.code, code)
			assert.Contains(t, body, tc.contains)
		})
	}
	_, index := get(http.MethodGet, "/")
	assert.Equal(t, 1, strings.Count(index, "<script"), "the index's own filter script only")
	assert.NotContains(t, index, "<b onmouseover")
}
