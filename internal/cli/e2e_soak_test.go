package cli

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
)

// readSoak reads the soak.json of the one soak directory under store.
func readSoak(t *testing.T, store string) (string, *results.Soak) {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(store, "*-soak-*"))
	require.NoError(t, err)
	require.Len(t, dirs, 1)
	b, err := os.ReadFile(filepath.Join(dirs[0], results.SoakFile))
	require.NoError(t, err)
	var s results.Soak
	require.NoError(t, json.Unmarshal(b, &s))
	return dirs[0], &s
}

// assertSegmentsCheckAlone checks each segment of a soak on its own with
// lockcheck check SEGMENT.jsonl.zst and expects the verdict and counts the
// soak recorded for it; the soak's grants are the segments' sum.
func assertSegmentsCheckAlone(t *testing.T, dir string, s *results.Soak) {
	t.Helper()
	var grants int64
	for _, seg := range s.Segments {
		grants += seg.Grants
		inv := lockcheck("check", filepath.Join(dir, seg.History))
		assert.Equal(t, exitCodeOf(seg.Valid), inv.code, "segment %d: %s%s", seg.Segment, inv.stdout, inv.stderr)
		recorded, err := results.ReadResults(filepath.Join(dir, strings.TrimSuffix(seg.History, ".jsonl.zst")+".checked"))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(dir, results.SegmentName("results", seg.Segment, ".json")))
		require.NoError(t, err)
		var archived results.Results
		require.NoError(t, json.Unmarshal(b, &archived))
		assert.Equal(t, archived.Valid, recorded.Valid, "segment %d", seg.Segment)
		assert.Equal(t, archived.HistoryEvents, recorded.HistoryEvents, "segment %d", seg.Segment)
		assert.Equal(t, archived.Checks.DoubleOwnership.UnsafeWrites, recorded.Checks.DoubleOwnership.UnsafeWrites, "segment %d", seg.Segment)
		assert.Equal(t, archived.Checks.Resource.LostUpdates, recorded.Checks.Resource.LostUpdates, "segment %d", seg.Segment)
		assert.Equal(t, archived.Checks.LeaseSafety.Violations, recorded.Checks.LeaseSafety.Violations, "segment %d", seg.Segment)
		assert.Equal(t, archived.FaultLanding, recorded.FaultLanding, "segment %d", seg.Segment)
	}
	assert.Equal(t, s.Grants, grants)
}

func exitCodeOf(v checker.Validity) int {
	switch v {
	case checker.Valid:
		return 0
	case checker.Invalid:
		return exitInvalid
	}
	return exitUnknown
}

// A short soak on a real Redis with a paused holder writes one segment per
// --segment, each checkable alone with the counts the soak recorded, a
// summary whose totals are the segments' sums, and junit with a case per
// segment.
func TestSoakSegmentsCheckAlone(t *testing.T) {
	testtier.Long(t)
	requireRedisServer(t)
	store := t.TempDir()
	inv := lockcheck("soak", "--out", store, "--duration", "20s", "--segment", "5s", "--backend", "redis",
		"--nemesis", "pause-holder", "--workload", "unfenced", "--seed", "1")
	dir, s := readSoak(t, store)
	assert.Equal(t, exitCodeOf(s.Valid), inv.code, inv.stdout+inv.stderr)
	require.Len(t, s.Segments, 4, "20s in segments of 5s")
	assert.False(t, s.Interrupted)
	reported := map[string]bool{}
	for i, seg := range s.Segments {
		assert.Equal(t, i+1, seg.Segment)
		assert.Equal(t, s.Seed, seg.Seed, "a soak is one run, of one seed")
		assert.Positive(t, seg.Events)
		newKind := false
		for check := range seg.Anomalies {
			newKind = newKind || !reported[check]
			reported[check] = true
		}
		assert.Equal(t, newKind, seg.Report != "", "segment %d: a report is kept for the first segment with each kind of anomaly", seg.Segment)
		if seg.Report != "" {
			_, err := os.Stat(filepath.Join(dir, seg.Report))
			assert.NoError(t, err)
		}
	}
	var landed, buckets int64
	for _, seg := range s.Segments {
		landed += int64(seg.Landed)
	}
	for _, c := range s.AcquireLatency {
		buckets += c
	}
	assert.Equal(t, int64(s.FaultsLanded), landed)
	assert.Equal(t, s.Grants, buckets, "every grant is in one latency bucket")
	assert.Len(t, s.AcquireLatency, len(results.LatencyBoundsMs)+1)
	assertSegmentsCheckAlone(t, dir, s)
	assertSegmentsGoOn(t, dir, s)

	var junit struct {
		Suites []struct {
			Cases []struct {
				Name string `xml:"name,attr"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	b, err := os.ReadFile(filepath.Join(dir, results.JUnitFile))
	require.NoError(t, err)
	require.NoError(t, xml.Unmarshal(b, &junit))
	require.Len(t, junit.Suites, 1)
	assert.Len(t, junit.Suites[0].Cases, 4, "one case per segment")
	_, err = os.Stat(filepath.Join(dir, "running"))
	assert.ErrorIs(t, err, os.ErrNotExist, "no segment is left unarchived")
	logs, err := filepath.Glob(filepath.Join(dir, "nodes", "*", "*.log"))
	require.NoError(t, err)
	assert.NotEmpty(t, logs, "the nodes, kept up for every segment, log in the soak directory")
	logs, err = filepath.Glob(filepath.Join(dir, results.LogsDir, "worker-*.log"))
	require.NoError(t, err)
	assert.NotEmpty(t, logs, "the clients, kept up for every segment, log in the soak directory")
}

// assertSegmentsGoOn reads the segments assertSegmentsCheckAlone
// decompressed: a soak is one run, so the clients of each segment go on
// in the next (the same process numbers), and each segment but the first
// starts from a head that names it and carries the resource's value.
func assertSegmentsGoOn(t *testing.T, dir string, s *results.Soak) {
	t.Helper()
	var before map[history.Process]bool
	for _, seg := range s.Segments {
		h, err := history.ReadFile(filepath.Join(dir, strings.TrimSuffix(seg.History, ".jsonl.zst")+".checked", results.HistoryFile))
		require.NoError(t, err)
		processes := map[history.Process]bool{}
		continued := false
		for _, e := range h.Events {
			if e.Process != history.Nemesis {
				processes[e.Process] = true
				continued = continued || before[e.Process]
			}
		}
		if seg.Segment == 1 {
			assert.Nil(t, h.Header.Head)
		} else {
			require.NotNil(t, h.Header.Head, "segment %d has a head", seg.Segment)
			assert.Equal(t, seg.Segment, h.Header.Head.Segment)
			require.NotEmpty(t, h.Header.Head.Keys)
			assert.NotNil(t, h.Header.Head.Keys[0].Value, "segment %d's head carries the resource's value", seg.Segment)
			assert.True(t, continued, "a client of segment %d goes on in segment %d", seg.Segment-1, seg.Segment)
		}
		before = processes
	}
}

// Ctrl-C during a soak ends the current segment as at its time limit and
// archives it; a crash (SIGKILL) loses only the segment being run. Either
// way every archived segment is checkable.
func TestSoakInterruptOrCrashKeepsSegments(t *testing.T) {
	testtier.Long(t)
	requireRedisServer(t)
	for _, signal := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(signal.String(), func(t *testing.T) {
			store := t.TempDir()
			cmd, stdout, stderr := lockcheckProcess(t, "soak", "--out", store, "--duration", "5m", "--segment", "3s",
				"--backend", "redis", "--nemesis", "pause-holder", "--seed", "2")
			// soak.json lists a segment once every file of it is in place.
			require.Eventually(t, func() bool {
				found, _ := filepath.Glob(filepath.Join(store, "*-soak-*", results.SoakFile))
				if len(found) != 1 {
					return false
				}
				b, _ := os.ReadFile(found[0])
				var s results.Soak
				return json.Unmarshal(b, &s) == nil && len(s.Segments) >= 2
			}, 2*time.Minute, 100*time.Millisecond, "two segments archived")
			require.NoError(t, cmd.Process.Signal(signal))
			code := exitCode(t, cmd)
			dir, s := readSoak(t, store)
			require.GreaterOrEqual(t, len(s.Segments), 2)
			if signal == syscall.SIGINT {
				assert.True(t, s.Interrupted, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
				assert.NotEqual(t, 0, code, "an interrupted soak is never a pass")
				assert.Contains(t, stderr.String(), "every finished segment is archived and checkable")
			} else {
				assert.Equal(t, -1, code, "killed")
			}
			assert.Eventually(t, func() bool { return len(processesUsing(store)) == 0 }, 20*time.Second, 100*time.Millisecond,
				"no server or worker outlives lockcheck: %v", processesUsing(store))
			assertSegmentsCheckAlone(t, dir, s)
		})
	}
}

// With --stop-on-anomaly the soak ends with the first segment that found an
// anomaly.
func TestSoakStopsOnAnomaly(t *testing.T) {
	testtier.Long(t)
	requireRedisServer(t)
	store := t.TempDir()
	inv := lockcheck("soak", "--out", store, "--duration", "45s", "--segment", "15s", "--backend", "redis",
		"--nemesis", "pause-holder", "--workload", "unfenced", "--seed", "4", "--stop-on-anomaly")
	_, s := readSoak(t, store)
	assert.Equal(t, exitCodeOf(s.Valid), inv.code, inv.stdout+inv.stderr)
	require.NotEmpty(t, s.Segments)
	first := slices.IndexFunc(s.Segments, func(seg results.SoakSegment) bool { return len(seg.Anomalies) > 0 })
	if first < 0 {
		assert.Len(t, s.Segments, 3, "with no anomaly every segment runs")
		return
	}
	assert.NotNil(t, s.Segments[first].FirstAnomalyMs)
	// The online check stops the segment it finds the anomaly in; the
	// check of a closed segment stops the next one.
	assert.LessOrEqual(t, len(s.Segments), first+2, "the soak went on after segment %d's anomaly", first+1)
	assert.Contains(t, inv.stdout, "an anomaly was found: the soak stopped in segment")
}

func TestSoakBadFlagsAreOneLineAndExitTwo(t *testing.T) {
	store := t.TempDir()
	assertRefused(t, store, []string{"soak", "--out", store}, []badInput{
		{"segment longer than duration", []string{"--duration", "10s", "--segment", "1m"}, "--segment 1m0s is longer than --duration 10s"},
		{"zero duration", []string{"--duration", "0s"}, "--duration 0s: give a positive duration"},
		{"zero segment", []string{"--segment", "0s"}, "--segment 0s: give a positive duration"},
		{"negative duration", []string{"--duration", "-1h"}, "--duration=-1h0m0s"},
		{"time limit", []string{"--time-limit", "5s"}, "--time-limit: a soak runs for --duration"},
		{"unknown nemesis", []string{"--nemesis", "meteor"}, `unknown nemesis "meteor"`},
		{"backends and backend", []string{"--backends", "redis", "--backend", "etcd"}, "--backends and --backend/--variant"},
		{"workloads and workload", []string{"--workloads", "fenced", "--workload", "unfenced"}, "--workloads and --workload"},
		{"bad shard", []string{"--shard", "3/2"}, `--shard "3/2": want I/N`},
		{"unknown backend in the matrix", []string{"--backends", "redis,meteor"}, "--backends:"},
	})
}

// soak --shard runs its share of the matrix of --backends × --workloads,
// one soak directory each, and merge gathers the shards' soaks into one
// folder with a junit suite per soak.
func TestSoakShardRunsItsShare(t *testing.T) {
	testtier.Long(t)
	requireRedisServer(t)
	var stores []string
	for shard, want := range []string{"-soak-redis-fenced", "-soak-redis-unfenced"} {
		store := t.TempDir()
		stores = append(stores, store)
		inv := lockcheck("soak", "--out", store, "--duration", "3s", "--segment", "3s", "--backends", "redis",
			"--workloads", "fenced,unfenced", "--nemesis", "none", "--shard", fmt.Sprintf("%d/2", shard+1), "--seed", "5")
		dirs, err := filepath.Glob(filepath.Join(store, "*-soak-*"))
		require.NoError(t, err)
		require.Len(t, dirs, 1, inv.stdout+inv.stderr)
		assert.True(t, strings.HasSuffix(dirs[0], want), "shard %d/2 runs the matrix's soak %d: %s", shard+1, shard+1, dirs[0])
		_, s := readSoak(t, store)
		assert.Equal(t, exitCodeOf(s.Valid), inv.code, inv.stdout+inv.stderr)
		assert.Equal(t, int64(5), s.Seed)
	}
	out := t.TempDir()
	inv := lockcheck(append([]string{"merge", "--out", out}, stores...)...)
	assert.Contains(t, inv.stdout, "merged 2 soaks", inv.stderr)
	merged, err := filepath.Glob(filepath.Join(out, "*"+results.SoaksSuffix, "*-soak-*", results.SoakFile))
	require.NoError(t, err)
	assert.Len(t, merged, 2, "both shards' soaks are in the merged folder")
	_, err = os.Stat(filepath.Join(filepath.Dir(filepath.Dir(merged[0])), results.JUnitFile))
	assert.NoError(t, err)
}
