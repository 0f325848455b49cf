package results

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/buildinfo"
	"github.com/lockcheck/lockcheck/workloads/resource"
)

// Schema is the version of results.json this package writes. The keys of
// issue 2's contract are never renamed; later versions only add keys.
const Schema = 1

// Results is the content of results.json. Its first keys are the contract CI
// jobs parse; Checks marshals with the contract's key names and may carry
// more detail than the contract promises.
type Results struct {
	Valid    checker.Validity `json:"valid"`
	Backend  string           `json:"backend"`
	Variant  string           `json:"variant"`
	Workload string           `json:"workload"`
	Nemesis  []string         `json:"nemesis"`
	Seed     int64            `json:"seed"`
	// Resource is the protected resource the run wrote: memory or postgres.
	Resource string         `json:"resource"`
	Checks   checker.Checks `json:"checks"`

	Reason        string            `json:"reason"`
	Config        history.RunConfig `json:"config"`
	HistoryEvents int               `json:"history_events"`
	Faults        []checker.Fault   `json:"faults"`
	Schema        int               `json:"schema"`
	// Truncated says which input files were cut off mid-line (a killed
	// run); the complete prefix was checked.
	Truncated checker.Truncated `json:"truncated"`

	// How the run ended (docs/results.md): interrupted before its time
	// limit, or incomplete (the history has no run-end event), and why a
	// verdict that is not false is unknown.
	Interrupted    bool     `json:"interrupted"`
	InterruptedBy  string   `json:"interrupted_by,omitempty"`
	Incomplete     bool     `json:"incomplete"`
	UnknownReasons []string `json:"unknown_reasons,omitempty"`
	// FaultLanding counts the nemesis steps and those whose fault landed.
	FaultLanding checker.FaultLanding `json:"fault_landing"`

	// FirstAnomalyMs is the time from the start of the run (its first
	// event) to the earliest evidence of a failed check, in ms; null when
	// no check failed. Present in every results.json.
	FirstAnomalyMs *float64 `json:"first_anomaly_ms"`
	// Sessions is the evidence of server sessions that went astray (a
	// pooler's signature); absent when there is none.
	Sessions *checker.ServerSessions `json:"sessions,omitempty"`
	// LibraryLosses are the lock-lost events of a lock client program's
	// library and how late each came (issue 37); absent when there is none.
	LibraryLosses []LibraryLoss `json:"library_losses,omitempty"`
	// ClientViolations are the rules of the client protocol a lock client
	// program broke (issue 38; checker.ClientViolation); absent when none.
	ClientViolations []checker.ClientViolation `json:"client_violations,omitempty"`
	// ClientViolationCount counts every break; the list keeps the first
	// 1000.
	ClientViolationCount int `json:"client_violation_count,omitempty"`
	// Lockcheck is the build of lockcheck that checked the history and
	// wrote this file (docs/results.md): a verdict that changed between
	// two nights can be told from a lockcheck that changed.
	Lockcheck buildinfo.Info `json:"lockcheck"`
}

// newResults assembles results.json from a history and its check.
func newResults(h *history.History, res *checker.Result) *Results {
	cfg := h.Header.Config
	r := &Results{
		Valid:         res.Valid,
		Backend:       cfg.Backend,
		Variant:       cfg.Variant,
		Workload:      cfg.Workload,
		Nemesis:       cfg.Nemesis,
		Seed:          cfg.Seed,
		Resource:      cfg.Resource,
		Checks:        res.Checks,
		Reason:        res.Reason,
		Config:        cfg,
		HistoryEvents: h.Length(),
		Lockcheck:     buildinfo.Current(),
		Faults:        res.Faults,
		Schema:        Schema,
		Truncated:     res.Truncated,

		Interrupted:    res.Interrupted,
		InterruptedBy:  res.InterruptedBy,
		Incomplete:     res.Incomplete,
		UnknownReasons: res.UnknownReasons,
		FaultLanding:   res.FaultLanding,
		FirstAnomalyMs: res.FirstAnomalyMs,
		Sessions:       res.Sessions,
		LibraryLosses:  libraryLosses(h),

		ClientViolations:     res.ClientViolations,
		ClientViolationCount: res.ClientViolationCount,
	}
	// CI scripts iterate over these; give them [] rather than null.
	if r.Resource == "" {
		r.Resource = resource.Memory
	}
	if r.Nemesis == nil {
		r.Nemesis = []string{}
	}
	if r.Faults == nil {
		r.Faults = []checker.Fault{}
	}
	return r
}

// ReadResults reads the results.json of a run directory, so that lockcheck
// check can compare a re-check with the verdict the run recorded.
func ReadResults(dir string) (*Results, error) {
	path := filepath.Join(dir, ResultsFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if r.Schema < 1 {
		return nil, fmt.Errorf("read %s: not a lockcheck results file (no \"schema\" key)", path)
	}
	return &r, nil
}
