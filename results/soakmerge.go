package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// SoaksFile is what a merge of soaks writes beside their directories:
// every soak's soak.json, in a list.
const SoaksFile = "soaks.json"

// SoaksSuffix ends the name of the folder a merge of soaks writes.
const SoaksSuffix = "-soaks"

// ReadSoak reads the soak.json of the soak directory dir.
func ReadSoak(dir string) (*Soak, error) {
	b, err := os.ReadFile(filepath.Join(dir, SoakFile))
	if err != nil {
		return nil, err
	}
	var s Soak
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, SoakFile), err)
	}
	return &s, nil
}

// MergeSoaks merges the soak directories dirs (the shards of one matrix
// of soaks, run on several machines) into a new folder under out,
// <timestamp>-soaks: each soak directory copied in, soaks.json listing
// their summaries in the order given, and junit.xml with one test suite
// per soak and a case per segment. The soaks must share their seed,
// duration and segment length, and no soak (backend, variant, workload)
// may come twice.
func MergeSoaks(out string, dirs []string, now time.Time) (string, []*Soak, error) {
	if len(dirs) == 0 {
		return "", nil, errors.New("nothing to merge")
	}
	soaks := make([]*Soak, len(dirs))
	seen := map[string]string{}
	for i, d := range dirs {
		s, err := ReadSoak(d)
		if err != nil {
			return "", nil, err
		}
		if first := soaks[0]; first != nil && (s.Seed != first.Seed || s.DurationMs != first.DurationMs || s.SegmentMs != first.SegmentMs) {
			return "", nil, fmt.Errorf("%s ran with seed %d for %d ms in %d ms segments, %s with seed %d for %d ms in %d ms segments: the shards of one matrix of soaks share --seed, --duration and --segment",
				d, s.Seed, s.DurationMs, s.SegmentMs, dirs[0], first.Seed, first.DurationMs, first.SegmentMs)
		}
		key := s.Backend + "/" + s.Variant + " " + s.Workload
		if other, dup := seen[key]; dup {
			return "", nil, fmt.Errorf("soak %s is in both %s and %s: merge the shards of one matrix, each once", key, other, d)
		}
		seen[key] = d
		soaks[i] = s
	}
	dir, err := newNumberedDir(out, now.Format(folderTimeLayout)+SoaksSuffix, "soaks")
	if err != nil {
		return "", nil, err
	}
	for _, d := range dirs {
		if err := copyTree(d, filepath.Join(dir, filepath.Base(d))); err != nil {
			return "", nil, err
		}
	}
	if err := writeFileAtomic(dir, SoaksFile, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(soaks)
	}); err != nil {
		return "", nil, err
	}
	err = writeFileAtomic(dir, JUnitFile, func(w io.Writer) error {
		all := junitSuites{Name: "lockcheck soaks"}
		for _, s := range soaks {
			suite := s.junitSuite()
			all.Tests += suite.Tests
			all.Failures += suite.Failures
			all.Errors += suite.Errors
			all.Suites = append(all.Suites, suite)
		}
		return encodeJUnit(w, all)
	})
	return dir, soaks, err
}
