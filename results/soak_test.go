package results

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"testing"
	"time"

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

// A soak's memory follows its clients and keys, neither the number of
// segments nor their length: the heap's peak while a segment is checked
// and archived as the soak does (CheckDirStreamed, ArchiveSegment, Write)
// is the same for the fifth segment as for the first, and for a sixth
// three times as long (within the garbage collector's pacing), and what the soak keeps between segments grows by
// a line of soak.json each. Every segment here writes its report, the
// heaviest case.
func TestSoakMemoryFollowsOneSegment(t *testing.T) {
	if testing.Short() {
		t.Skip("checks six segments of 120,000 events or more")
	}
	src := t.TempDir()
	short, long := segmentHistory(t, src, "short", 20_000), segmentHistory(t, src, "long", 60_000)
	// A heap that the collector keeps close to what is live, so that the
	// peaks measure what a check holds rather than the collector's pacing,
	// which a busy machine moves.
	defer debug.SetGCPercent(debug.SetGCPercent(20))
	runtime.GC()

	dir := t.TempDir()
	s := NewSoak()
	histories := []string{short, short, short, short, short, long}
	peaks, retained := make([]uint64, len(histories)), make([]uint64, len(histories))
	for i, path := range histories {
		n := i + 1
		runDir := filepath.Join(dir, "running", fmt.Sprint(n))
		require.NoError(t, os.MkdirAll(runDir, 0o755))
		require.NoError(t, copyFile(path, filepath.Join(runDir, HistoryFile)))
		clear(s.reported)
		peaks[i] = peakHeap(func() {
			h, res, err := CheckDirStreamed(runDir, checker.Options{})
			require.NoError(t, err)
			seg, err := s.ArchiveSegment(dir, runDir, n, true, h, res)
			require.NoError(t, err)
			require.NotEmpty(t, seg.Report, "segment %d writes its report", n)
			require.NoError(t, s.Write(dir))
		})
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		retained[i] = m.HeapAlloc
	}
	t.Logf("peak heap per segment (MB): %v; retained after each (MB): %v", mb(peaks), mb(retained))
	// A segment three times as long takes no more than the short ones, so
	// none is held whole: a short segment loaded whole peaks at three times
	// a long one checked as it is read. The short ones' highest peak is the
	// yardstick, since a sampler starved of CPU can only miss a peak, never
	// invent one; the margin is what is left of the collector's pacing.
	assert.LessOrEqual(t, peaks[5], slices.Max(peaks[:5])*3/2, "the long segment's peak within half of the short ones'")
	assert.Less(t, retained[4], retained[0]+1<<20, "what the soak keeps grows by less than a MB over the segments")
}

// segmentHistory writes a history of cycles lock cycles of five clients
// (six events each) to dir/name and returns its path. Every thousandth
// holder never releases: the next grant comes while its lease is live, an
// anomaly that makes each segment write its report.
func segmentHistory(t *testing.T, dir, name string, cycles int) string {
	h := lockCycles(5, cycles, int64(cycles)*15e6)
	kept := h.Events[:0]
	for i, e := range h.Events {
		if e.F == history.FRelease && (i/6)%1000 == 999 {
			continue
		}
		e.Index = int64(len(kept))
		kept = append(kept, e)
	}
	h.Events = kept
	path := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(path, 0o755))
	writeHistory(t, path, h)
	return filepath.Join(path, HistoryFile)
}

// peakHeap runs f and returns the largest heap (live and garbage objects)
// seen while it ran, sampled every millisecond.
func peakHeap(f func()) uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	done, peak := make(chan struct{}), make(chan uint64)
	go func() {
		var most uint64
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			most = max(most, sample[0].Value.Uint64())
			select {
			case <-done:
				peak <- most
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(done)
	return <-peak
}

func mb(bytes []uint64) []uint64 {
	out := make([]uint64, len(bytes))
	for i, b := range bytes {
		out[i] = b >> 20
	}
	return out
}
