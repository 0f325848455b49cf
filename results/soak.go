package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/buildinfo"
)

// A soak directory holds one long test cut into segments, each a run of
// its own (docs/results.md, "Soak directory"):
//
//	history-0001.jsonl.zst   the segment's history, zstd-compressed
//	resource-0001.jsonl.zst  its resource log, when it has one
//	results-0001.json        its results.json
//	report-0001.html         its report (with the timeline) zoomed on the
//	                         first findings, kept for the first segment
//	                         with each kind of anomaly
//	soak.json                the soak's summary, rewritten after each segment
//	junit.xml                one test case per segment
//
// Its size follows the number of segments, never the events in them.
const (
	SoakFile       = "soak.json"
	segmentPattern = "%s-%04d%s"
)

// NewSoakDir creates <out>/<YYYYMMDDTHHMMSS>-soak-<backend>-<workload>/,
// with a -2, -3, ... suffix when a soak of the same test started in the
// same second.
func NewSoakDir(out, backend, workload string, now time.Time) (string, error) {
	return newNumberedDir(out, now.Format(soakTimeLayout)+"-soak-"+pathSafe(backend)+"-"+pathSafe(workload), "soak")
}

// SegmentName is the file name of segment n's kind (history, resource,
// results, report) with the extension ext.
func SegmentName(kind string, n int, ext string) string {
	return fmt.Sprintf(segmentPattern, kind, n, ext)
}

// LatencyBoundsMs are the upper bounds of the soak's acquire-latency
// buckets in ms; a last bucket takes everything slower. Fixed, so the
// summary of an 8-hour soak is as long as a minute's.
var LatencyBoundsMs = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000}

// Soak is soak.json: the soak's configuration, its segments, and the
// grants, latency and faults summed over all of them.
type Soak struct {
	Valid      checker.Validity `json:"valid"`
	Backend    string           `json:"backend"`
	Variant    string           `json:"variant"`
	Workload   string           `json:"workload"`
	Nemesis    []string         `json:"nemesis"`
	Seed       int64            `json:"seed"`
	DurationMs int64            `json:"duration_ms"`
	SegmentMs  int64            `json:"segment_ms"`
	// Interrupted says the soak ended before its duration (Ctrl-C).
	Interrupted bool          `json:"interrupted"`
	Segments    []SoakSegment `json:"segments"`
	Grants      int64         `json:"grants"`
	// AcquireLatency counts the granted acquires by how long they took,
	// bucket i holding those up to LatencyBoundsMs[i] (and above the
	// previous bound), the last bucket the slower ones.
	AcquireLatency  []int64   `json:"acquire_latency"`
	LatencyBoundsMs []float64 `json:"latency_bounds_ms"`
	FaultsInjected  int       `json:"faults_injected"`
	FaultsLanded    int       `json:"faults_landed"`
	AnomalySegments int       `json:"anomaly_segments"`
	Schema          int       `json:"schema"`
	// Lockcheck is the build that ran the soak.
	Lockcheck buildinfo.Info `json:"lockcheck"`

	// reported are the checks whose anomalies a kept report shows.
	reported map[string]bool
}

// SoakSegment is one segment's line of soak.json.
type SoakSegment struct {
	Segment    int              `json:"segment"`
	Valid      checker.Validity `json:"valid"`
	Seed       int64            `json:"seed"`
	History    string           `json:"history"`
	Events     int              `json:"events"`
	Grants     int64            `json:"grants"`
	Anomalies  map[string]int   `json:"anomalies"`
	Faults     int              `json:"faults_injected"`
	Landed     int              `json:"faults_landed"`
	Report     string           `json:"report,omitempty"`
	Incomplete bool             `json:"incomplete"`
	// FirstAnomalyMs is the segment's first_anomaly_ms: where its report's
	// timeline zooms in.
	FirstAnomalyMs *float64 `json:"first_anomaly_ms"`
}

// NewSoak starts the summary of a soak.
func NewSoak() *Soak {
	return &Soak{Valid: checker.Valid, AcquireLatency: make([]int64, len(LatencyBoundsMs)+1), LatencyBoundsMs: LatencyBoundsMs, Schema: Schema, Segments: []SoakSegment{}, reported: map[string]bool{}, Lockcheck: buildinfo.Current()}
}

// ArchiveSegment moves segment n out of runDir (a run directory lockcheck
// run wrote and CheckDirStreamed checked, h and res being what it
// returned) into the soak directory dir: the history and the resource log
// compressed, results.json, and its report drawn from h, the excerpt of
// its history, when it found an anomaly of a check no earlier segment's
// report shows. Nothing is checked again and no history is held whole: the
// memory of archiving follows the clients and keys, not the segment's
// length. It adds the segment to s and returns what it added; runDir is
// removed once everything is in place.
func (s *Soak) ArchiveSegment(dir, runDir string, n int, fenced bool, h *history.History, res *checker.Result) (SoakSegment, error) {
	written, err := ReadResults(runDir)
	if err != nil {
		return SoakSegment{}, err
	}
	seg := SoakSegment{
		Segment: n, Valid: written.Valid, Seed: written.Seed, History: SegmentName("history", n, ".jsonl.zst"),
		Events: written.HistoryEvents, Anomalies: map[string]int{}, Faults: written.FaultLanding.Injected,
		Landed: written.FaultLanding.Landed, Incomplete: written.Incomplete, FirstAnomalyMs: written.FirstAnomalyMs,
	}
	for _, a := range checker.AnomaliesByCheck(&checker.Result{Checks: written.Checks}, fenced) {
		seg.Anomalies[a.Key] = a.Count
	}
	latency := make([]int64, len(s.AcquireLatency))
	historyPath := filepath.Join(runDir, HistoryFile)
	if seg.Grants, err = countGrants(historyPath, latency); err != nil {
		return SoakSegment{}, err
	}
	if err := compressFile(historyPath, filepath.Join(dir, seg.History)); err != nil {
		return SoakSegment{}, err
	}
	err = compressFile(filepath.Join(runDir, ResourceFile), filepath.Join(dir, SegmentName("resource", n, ".jsonl.zst")))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return SoakSegment{}, err
	}
	if err := copyFile(filepath.Join(runDir, ResultsFile), filepath.Join(dir, SegmentName("results", n, ".json"))); err != nil {
		return SoakSegment{}, err
	}
	if s.firstOfItsKind(seg.Anomalies) {
		seg.Report = SegmentName("report", n, ".html")
		err := writeFileAtomic(dir, seg.Report, func(w io.Writer) error { return writeReport(w, h, res, "", "") })
		if err != nil {
			return SoakSegment{}, err
		}
	}
	s.add(seg, latency)
	return seg, os.RemoveAll(runDir)
}

// firstOfItsKind reports whether a segment found anomalies of a check no
// earlier segment's kept report shows, and notes them as shown: a soak
// keeps the report of the first segment with each kind of anomaly, so
// that a night of the same anomaly keeps one report, not one a segment.
func (s *Soak) firstOfItsKind(anomalies map[string]int) bool {
	first := false
	for check := range anomalies {
		if !s.reported[check] {
			s.reported[check], first = true, true
		}
	}
	return first
}

// add counts a segment into the summary.
func (s *Soak) add(seg SoakSegment, latency []int64) {
	s.Segments = append(s.Segments, seg)
	s.Grants += seg.Grants
	for i, c := range latency {
		s.AcquireLatency[i] += c
	}
	s.FaultsInjected += seg.Faults
	s.FaultsLanded += seg.Landed
	if len(seg.Anomalies) > 0 {
		s.AnomalySegments++
	}
	switch {
	case seg.Valid == checker.Invalid || s.Valid == checker.Invalid:
		s.Valid = checker.Invalid
	case seg.Valid != checker.Valid:
		s.Valid = checker.Unknown
	}
}

// Interrupt notes that the soak ended before its duration: its verdict
// is then unknown unless a segment's is false, as an interrupted run's.
func (s *Soak) Interrupt() {
	s.Interrupted = true
	if s.Valid == checker.Valid {
		s.Valid = checker.Unknown
	}
}

// Write rewrites soak.json and junit.xml in dir, each atomically: a crash
// leaves the previous ones.
func (s *Soak) Write(dir string) error {
	if err := writeFileAtomic(dir, SoakFile, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}); err != nil {
		return err
	}
	return writeFileAtomic(dir, JUnitFile, s.writeJUnit)
}

// writeJUnit writes the soak's test suite.
func (s *Soak) writeJUnit(w io.Writer) error {
	suite := s.junitSuite()
	return encodeJUnit(w, junitSuites{Name: suite.Name, Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors, Suites: []junitSuite{suite}})
}

// junitSuite is the soak as a test suite, one test case per segment:
// failed when its verdict is false, an error when it is unknown.
func (s *Soak) junitSuite() junitSuite {
	cfg := history.RunConfig{Backend: s.Backend, Variant: s.Variant, Workload: s.Workload, Nemesis: s.Nemesis}
	suite := junitSuite{
		Name: "lockcheck soak " + runTitle(cfg) + " " + nemesisName(cfg),
		Properties: []junitProperty{
			{"verdict", s.Valid.String()}, {"seed", fmt.Sprint(s.Seed)},
			{"duration_ms", fmt.Sprint(s.DurationMs)}, {"segment_ms", fmt.Sprint(s.SegmentMs)},
		},
	}
	classname := "lockcheck.soak." + strings.ReplaceAll(runTitle(cfg), "/", ".")
	for _, seg := range s.Segments {
		name := fmt.Sprintf("segment-%04d", seg.Segment)
		if seg.Valid == checker.Valid {
			suite.Cases = append(suite.Cases, junitCase{Name: name, Classname: classname})
			continue
		}
		suite.addVerdictCase(name, classname, seg.Valid, &junitProblem{
			Message: fmt.Sprintf("segment %d: verdict %s, anomalies %v", seg.Segment, seg.Valid, seg.Anomalies),
			Details: "lockcheck check " + seg.History,
		})
	}
	suite.Tests = len(suite.Cases)
	return suite
}

// compressFile writes the file from zstd-compressed to to (through a
// temporary file renamed into place, so a crash never leaves half a
// segment).
func compressFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	return writeFileAtomic(filepath.Dir(to), filepath.Base(to), func(w io.Writer) error {
		zw, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return err
		}
		if _, err := io.Copy(zw, in); err != nil {
			zw.Close()
			return err
		}
		return zw.Close()
	})
}

// countGrants reads a history and counts its granted acquires, adding each
// one's latency (invoke to ok) to its bucket.
func countGrants(path string, latency []int64) (int64, error) {
	r, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	invoked := map[history.Process]int64{}
	var grants int64
	_, err = history.Stream(r, func(history.Header) error { return nil }, func(e *history.Event) error {
		if e.F != history.FAcquire {
			return nil
		}
		switch e.Type {
		case history.Invoke:
			invoked[e.Process] = e.Time
		case history.OK:
			grants++
			ms := float64(e.Time-invoked[e.Process]) / 1e6
			i := 0
			for i < len(LatencyBoundsMs) && ms > LatencyBoundsMs[i] {
				i++
			}
			latency[i]++
			fallthrough
		default:
			delete(invoked, e.Process)
		}
		return nil
	})
	return grants, err
}

// OpenSegment decompresses the segment history at path (a
// history-NNNN.jsonl.zst of a soak directory), with its resource log when
// there is one, into the run directory beside it whose name ends in
// .checked (history-NNNN.checked), which lockcheck check then checks as any
// other and leaves the results and report in.
func OpenSegment(path string) (string, error) {
	base := filepath.Base(path)
	dir := filepath.Join(filepath.Dir(path), strings.TrimSuffix(base, ".jsonl.zst")+".checked")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := decompressFile(path, filepath.Join(dir, HistoryFile)); err != nil {
		return "", err
	}
	if strings.HasPrefix(base, "history-") {
		resource := filepath.Join(filepath.Dir(path), "resource-"+strings.TrimPrefix(base, "history-"))
		err := decompressFile(resource, filepath.Join(dir, ResourceFile))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	return dir, nil
}

func decompressFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	zr, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	defer zr.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, zr); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", from, err)
	}
	return out.Close()
}
