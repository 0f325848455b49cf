package results

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
)

// writeSoakDir writes a soak directory under store with one segment per
// verdict.
func writeSoakDir(t *testing.T, store, name, backend string, seed int64, verdicts ...checker.Validity) string {
	t.Helper()
	dir := filepath.Join(store, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	s := NewSoak()
	s.Backend, s.Variant, s.Workload, s.Nemesis = backend, "correct", "fenced", []string{"pause-holder"}
	s.Seed, s.DurationMs, s.SegmentMs = seed, 20000, 10000
	for i, v := range verdicts {
		s.add(SoakSegment{Segment: i + 1, Valid: v, History: SegmentName("history", i+1, ".jsonl.zst"), Anomalies: map[string]int{}}, make([]int64, len(s.AcquireLatency)))
	}
	require.NoError(t, s.Write(dir))
	return dir
}

// The soaks of several shards merge into one folder: each soak directory
// copied in, soaks.json listing them, and junit.xml with a suite per soak
// and a case per segment, failures and errors summed.
func TestMergeSoaks(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeSoakDir(t, a, "20261130T010203-soak-redis-fenced", "redis", 7, checker.Valid, checker.Valid)
	writeSoakDir(t, b, "20261130T010203-soak-etcd-fenced", "etcd", 7, checker.Valid, checker.Invalid)
	comparisons, soaks, _, err := FindMergeable([]string{a, b})
	require.NoError(t, err)
	assert.Empty(t, comparisons)
	require.Len(t, soaks, 2)

	out := t.TempDir()
	dir, merged, err := MergeSoaks(out, soaks, time.Now())
	require.NoError(t, err)
	require.Len(t, merged, 2)
	assert.Equal(t, checker.Invalid, merged[1].Valid)
	for _, name := range []string{"20261130T010203-soak-redis-fenced", "20261130T010203-soak-etcd-fenced"} {
		_, err := ReadSoak(filepath.Join(dir, name))
		assert.NoError(t, err, "%s is copied in", name)
	}
	var listed []Soak
	b2, err := os.ReadFile(filepath.Join(dir, SoaksFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b2, &listed))
	require.Len(t, listed, 2)
	assert.Equal(t, "redis", listed[0].Backend)

	var junit struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name string `xml:"name,attr"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	b2, err = os.ReadFile(filepath.Join(dir, JUnitFile))
	require.NoError(t, err)
	require.NoError(t, xml.Unmarshal(b2, &junit))
	assert.Equal(t, 4, junit.Tests)
	assert.Equal(t, 1, junit.Failures)
	require.Len(t, junit.Suites, 2, "a suite per soak")
	assert.Len(t, junit.Suites[1].Cases, 2, "a case per segment")
}

func TestMergeSoaksRefuses(t *testing.T) {
	for _, tt := range []struct {
		name    string
		backend string
		seed    int64
		want    string
	}{
		{"the same soak twice", "redis", 7, "is in both"},
		{"another seed", "etcd", 8, "share --seed, --duration and --segment"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := t.TempDir()
			first := writeSoakDir(t, store, "a-soak", "redis", 7, checker.Valid)
			second := writeSoakDir(t, store, "b-soak", tt.backend, tt.seed, checker.Valid)
			_, _, err := MergeSoaks(t.TempDir(), []string{first, second}, time.Now())
			assert.ErrorContains(t, err, tt.want)
		})
	}
}
