package results

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// The soak's verdict is false if any segment is, else unknown if any is,
// else true.
func TestSoakVerdict(t *testing.T) {
	for _, tt := range []struct {
		name     string
		segments []checker.Validity
		want     checker.Validity
	}{
		{"all true", []checker.Validity{checker.Valid, checker.Valid}, checker.Valid},
		{"one unknown", []checker.Validity{checker.Valid, checker.Unknown}, checker.Unknown},
		{"false before unknown", []checker.Validity{checker.Invalid, checker.Unknown}, checker.Invalid},
		{"unknown before false", []checker.Validity{checker.Unknown, checker.Invalid, checker.Valid}, checker.Invalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSoak()
			for i, v := range tt.segments {
				s.add(SoakSegment{Segment: i + 1, Valid: v, Grants: 2}, make([]int64, len(s.AcquireLatency)))
			}
			assert.Equal(t, tt.want, s.Valid)
			assert.Equal(t, int64(2*len(tt.segments)), s.Grants)
		})
	}
}

// countGrants puts each granted acquire in the bucket of its latency and
// counts no refused one.
func TestCountGrants(t *testing.T) {
	path := filepath.Join(t.TempDir(), HistoryFile)
	w, err := history.Create(path, history.Header{Config: history.RunConfig{Backend: "redis", Clients: 2, Keys: 1}})
	require.NoError(t, err)
	ms := int64(1e6)
	for _, e := range []history.Event{
		{Time: 0, Process: 0, Type: history.Invoke, F: history.FAcquire, Key: "lock-0"},
		{Time: 1 * ms, Process: 1, Type: history.Invoke, F: history.FAcquire, Key: "lock-0"},
		{Time: 3 * ms, Process: 0, Type: history.OK, F: history.FAcquire, Key: "lock-0", Value: &history.Value{Token: "a"}}, // 3 ms
		{Time: 4 * ms, Process: 1, Type: history.Fail, F: history.FAcquire, Key: "lock-0"},
		{Time: 5 * ms, Process: 1, Type: history.Invoke, F: history.FAcquire, Key: "lock-0"},
		{Time: 9000 * ms, Process: 1, Type: history.OK, F: history.FAcquire, Key: "lock-0", Value: &history.Value{Token: "b"}}, // 8995 ms
	} {
		_, err := w.Append(e)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	latency := make([]int64, len(LatencyBoundsMs)+1)
	grants, err := countGrants(path, latency)
	require.NoError(t, err)
	assert.Equal(t, int64(2), grants)
	want := make([]int64, len(LatencyBoundsMs)+1)
	want[2] = 1           // up to 5 ms
	want[len(want)-1] = 1 // over 5 s
	assert.Equal(t, want, latency)
}

// A segment compressed and opened again is the same history, with its
// resource log beside it.
func TestSegmentRoundTrip(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	require.NoError(t, os.WriteFile(src, []byte("{\"lockcheck_history\":1}\n"), 0o644))
	res := filepath.Join(dir, "res")
	require.NoError(t, os.WriteFile(res, []byte("{\"seq\":1}\n"), 0o644))
	require.NoError(t, compressFile(src, filepath.Join(dir, SegmentName("history", 7, ".jsonl.zst"))))
	require.NoError(t, compressFile(res, filepath.Join(dir, SegmentName("resource", 7, ".jsonl.zst"))))

	opened, err := OpenSegment(filepath.Join(dir, "history-0007.jsonl.zst"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "history-0007.checked"), opened)
	for name, want := range map[string]string{HistoryFile: "{\"lockcheck_history\":1}\n", ResourceFile: "{\"seq\":1}\n"} {
		b, err := os.ReadFile(filepath.Join(opened, name))
		require.NoError(t, err)
		assert.Equal(t, want, string(b), name)
	}
}

// A soak keeps the report of the first segment with each kind of anomaly.
func TestSoakKeepsOneReportPerKindOfAnomaly(t *testing.T) {
	s := NewSoak()
	for _, tt := range []struct {
		anomalies map[string]int
		kept      bool
	}{
		{map[string]int{}, false},
		{map[string]int{"resource": 3}, true},
		{map[string]int{"resource": 5}, false},
		{map[string]int{"resource": 1, "double_ownership": 2}, true},
		{map[string]int{"double_ownership": 9}, false},
	} {
		assert.Equal(t, tt.kept, s.firstOfItsKind(tt.anomalies), "%v", tt.anomalies)
	}
}

// A soak cut short is never a pass, and a false one stays false.
func TestSoakInterrupt(t *testing.T) {
	for _, tt := range []struct{ before, want checker.Validity }{
		{checker.Valid, checker.Unknown},
		{checker.Unknown, checker.Unknown},
		{checker.Invalid, checker.Invalid},
	} {
		s := NewSoak()
		s.add(SoakSegment{Segment: 1, Valid: tt.before}, make([]int64, len(s.AcquireLatency)))
		s.Interrupt()
		assert.True(t, s.Interrupted)
		assert.Equal(t, tt.want, s.Valid, "after a %s segment", tt.before)
	}
}
