package results

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
)

// The JUnit XML shape CI systems (Jenkins, GitLab, GitHub test reporters)
// read: one suite per run, one test case per check.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

// add appends a suite and counts its tests.
func (d *junitSuites) add(s junitSuite) {
	d.Suites = append(d.Suites, s)
	d.Tests += s.Tests
	d.Failures += s.Failures
	d.Errors += s.Errors
	d.Skipped += s.Skipped
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitProblem `xml:"failure"`
	Error     *junitProblem `xml:"error"`
	Skipped   *junitProblem `xml:"skipped"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Details string `xml:",chardata"`
}

// suiteName names the run as junit.xml's test suite:
// "lockcheck redis/correct/unfenced pause-holder".
func suiteName(cfg history.RunConfig) string {
	return "lockcheck " + runTitle(cfg) + " " + nemesisName(cfg)
}

// runTitle is backend/variant/workload, without an empty variant.
func runTitle(cfg history.RunConfig) string {
	parts := []string{cfg.Backend}
	if cfg.Variant != "" {
		parts = append(parts, cfg.Variant)
	}
	return strings.Join(append(parts, cfg.Workload), "/")
}

func nemesisName(cfg history.RunConfig) string {
	if len(cfg.Nemesis) == 0 {
		return "none"
	}
	return strings.Join(cfg.Nemesis, ",")
}

func writeJUnit(w io.Writer, h *history.History, res *checker.Result) error {
	cfg := h.Header.Config
	suite := junitSuite{
		Name: suiteName(cfg),
		Properties: []junitProperty{
			{"verdict", res.Valid.String()},
			{"reason", res.Reason},
			{"backend", cfg.Backend},
			{"variant", cfg.Variant},
			{"workload", cfg.Workload},
			{"nemesis", nemesisName(cfg)},
			{"seed", fmt.Sprint(cfg.Seed)},
		},
	}
	classname := "lockcheck." + strings.ReplaceAll(runTitle(cfg), "/", ".")
	if note := resultNote(res); note != "" {
		suite.Properties = append(suite.Properties, junitProperty{"interrupted", fmt.Sprint(res.Interrupted)}, junitProperty{"incomplete", fmt.Sprint(res.Incomplete)})
		// A cut-short run is never green: it fails with its checks, or is an
		// error of its own.
		suite.addVerdictCase("run", classname, res.Valid, &junitProblem{Message: note, Details: strings.Join(res.UnknownReasons, "\n")})
	}
	for _, st := range checkStatuses(cfg, res, spanOf(h, res).Start) {
		tc := junitCase{Name: st.Key, Classname: classname}
		details := strings.Join(st.Details, "\n")
		switch st.Outcome {
		case checker.StatusFailed:
			tc.Failure = &junitProblem{Message: st.Message, Details: details}
			suite.Failures++
		case checker.StatusUnknown:
			tc.Error = &junitProblem{Message: st.Message, Details: details}
			suite.Errors++
		case checker.StatusSkipped:
			tc.Skipped = &junitProblem{Message: st.Message}
			suite.Skipped++
		default:
			tc.SystemOut = strings.TrimSpace(strings.Join([]string{st.Numbers, st.Message, details}, "\n"))
		}
		suite.Cases = append(suite.Cases, tc)
	}
	// The checks explain every verdict the checker gives today. Should a
	// future verdict be false or unknown for a reason no check shows, CI must
	// still not see a green suite, so the verdict becomes a test case.
	if res.Valid != checker.Valid && suite.Failures+suite.Errors == 0 {
		suite.addVerdictCase("verdict", classname, res.Valid, &junitProblem{Message: fmt.Sprintf("The verdict is %s: %s", res.Valid, res.Reason)})
	}
	suite.Tests = len(suite.Cases)
	doc := junitSuites{
		Name: suite.Name, Tests: suite.Tests, Failures: suite.Failures,
		Errors: suite.Errors, Skipped: suite.Skipped, Suites: []junitSuite{suite},
	}
	return encodeJUnit(w, doc)
}

// addVerdictCase adds a test case that fails when the verdict is false and
// is an error otherwise (unknown).
func (s *junitSuite) addVerdictCase(name, classname string, v checker.Validity, problem *junitProblem) {
	tc := junitCase{Name: name, Classname: classname}
	if v == checker.Invalid {
		tc.Failure = problem
		s.Failures++
	} else {
		tc.Error = problem
		s.Errors++
	}
	s.Cases = append(s.Cases, tc)
}

// encodeJUnit writes a junit.xml document: the XML header, the suites
// indented, a final newline.
func encodeJUnit(w io.Writer, doc junitSuites) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
