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

	"github.com/lockcheck/lockcheck/checker"
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
	// A soak: its segments' run directories are archived into it, and
	// soak.json says how it went so far.
	soakDir := filepath.Join(store, "20250102T045000-soak-etcd-fenced")
	require.NoError(t, os.Mkdir(soakDir, 0o755))
	soak := NewSoak()
	soak.Backend, soak.Workload, soak.Nemesis, soak.SegmentMs = "etcd", "fenced", []string{"pause-holder"}, 60_000
	soak.add(SoakSegment{Segment: 1, Valid: checker.Valid, Faults: 2, Landed: 2, Grants: 40}, nil)
	soak.add(SoakSegment{Segment: 2, Valid: checker.Invalid, Faults: 1, Landed: 1, Grants: 30,
		Anomalies: map[string]int{"lease": 1}, Report: SegmentName("report", 2, ".html")}, nil)
	require.NoError(t, soak.Write(soakDir))
	// An unreadable soak.json is listed as such, never dropped.
	broken := filepath.Join(store, "20250102T010000-soak-redis-fenced")
	require.NoError(t, os.Mkdir(broken, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(broken, SoakFile), []byte("{"), 0o644))

	entries, err := ScanStore(store)
	require.NoError(t, err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Kind+" "+e.Path+" "+e.Verdict)
	}
	assert.Equal(t, []string{
		"run 20250102-050000-redis-fenced not checked",
		"soak 20250102T045000-soak-etcd-fenced false",
		"compare 20250102-040000-compare comparison",
		"run 20250102-040000-compare/run-fenced true",
		"run 20250102-040000-compare/run-unfenced false",
		"run 20250102-030405-redis-unfenced false",
		"soak 20250102T010000-soak-redis-fenced unreadable",
	}, got, "newest first, the latest link and folders that are not runs left out")
	assert.Equal(t, "20250102-040000-compare/compare.html", entries[2].Href)
	assert.Equal(t, "4 cells: 1 true, 1 false, 1 skipped, 1 error.", entries[2].Summary)
	assert.Equal(t, "20250102-040000-compare", entries[3].Parent)
	assert.Equal(t, "20250102-050000-redis-fenced/", entries[0].Href, "an unchecked run links to its folder")
	assert.Equal(t, "redis/correct", entries[5].Backend)
	assert.Equal(t, "pause-holder", entries[5].Faults)
	assert.Equal(t, "20250102T045000-soak-etcd-fenced/report-0002.html", entries[1].Href, "a soak links to the first report it kept")
	assert.Equal(t, "2 segments of 1m0s, 1 with anomalies; 70 grants; 3 of 3 faults landed.", entries[1].Summary)
	assert.Equal(t, "fail", entries[1].Class)
	assert.Contains(t, entries[6].Summary, SoakFile)

	var page strings.Builder
	require.NoError(t, WriteIndex(&page, store, entries))
	assert.Contains(t, page.String(), `<option value="etcd">etcd</option>`, "a soak's backend is among the filter's")
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
	// A client program's log is the program's text: it may be markup.
	require.NoError(t, os.MkdirAll(filepath.Join(store, "20250102-030405-redis-unfenced", "logs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(store, "20250102-030405-redis-unfenced", "logs", "client-c0.log"), []byte("<html><script>alert(1)</script>"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(store, "20250102-030405-redis-unfenced", "logs", "page.html"), []byte("<html><script>alert(1)</script>"), 0o644))
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
	for _, tc := range []struct{ path, contentType string }{
		{"/20250102-030405-redis-unfenced/logs/client-c0.log", "text/plain; charset=utf-8"},
		{"/20250102-030405-redis-unfenced/logs/page.html", "text/plain; charset=utf-8"},
		{"/20250102-030405-redis-unfenced/history.jsonl", "text/plain; charset=utf-8"},
		{"/20250102-030405-redis-unfenced/results.json", "text/plain; charset=utf-8"},
		{"/20250102-030405-redis-unfenced/report.html", "text/html; charset=utf-8"},
		{"/", "text/html; charset=utf-8"},
	} {
		t.Run("type of "+tc.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tc.path)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, tc.contentType, resp.Header.Get("Content-Type"), "a file lockcheck did not render is plain text")
			assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
		})
	}
	_, index := get(http.MethodGet, "/")
	assert.Equal(t, 1, strings.Count(index, "<script"), "the index's own filter script only")
	assert.NotContains(t, index, "<b onmouseover")
}
