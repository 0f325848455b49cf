package scenario

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"path"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/results"
	"github.com/lockcheck/lockcheck/workloads"
)

//go:embed catalog/*.yaml
var shipped embed.FS

// Catalogue parses every scenario shipped inside the binary, by name.
func Catalogue() ([]*File, error) {
	entries, err := fs.ReadDir(shipped, "catalog")
	if err != nil {
		return nil, err
	}
	var out []*File
	for _, e := range entries {
		data, err := shipped.ReadFile(path.Join("catalog", e.Name()))
		if err != nil {
			return nil, err
		}
		if !backendInProgram(data) {
			continue
		}
		f, err := Parse(e.Name(), data)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// backendInProgram reports whether the scenario's backend is one this
// program has: a program of a user's own carries only some (package
// withetcd adds etcd).
func backendInProgram(data []byte) bool {
	var head struct {
		Backend string  `yaml:"backend"`
		Client  *Client `yaml:"client"`
	}
	if yaml.Unmarshal(data, &head) != nil || head.Client != nil {
		return true // Parse says what is wrong with it, or registers the client program
	}
	_, _, err := catalog.Lookup(head.Backend, "")
	return err == nil
}

// Plan is the plan of the run of the scenario (harness.NewPlan of its
// request, Config).
func (f *File) Plan(out string, programs catalog.Programs, runParams map[string]string) (harness.Config, error) {
	return harness.NewPlan(f.Config(out, programs, runParams))
}

// Config is the request of the run of the scenario: what the file says,
// mapped into a harness configuration for harness.NewPlan. runParams
// are settings of the run rather than of the incident (the runtime and its
// images); they go into the run's params beside the scenario's own.
func (f *File) Config(out string, programs catalog.Programs, runParams map[string]string) harness.Config {
	ttl := f.TTL.D()
	params := map[string]string{}
	for k, v := range f.Params {
		params[k] = v
	}
	// The backend's own params as its flags record them (Parse checked
	// them), beside the faults' and the runtime's.
	maps.Copy(params, f.settings)
	for k, v := range runParams {
		params[k] = v
	}
	if f.Watchdog {
		params[workloads.ParamWatchdog] = "true"
	}
	// A scenario with no timeline injects no fault: it has no nemesis to
	// be judged by.
	nemesis := []string{}
	if len(f.Timeline) > 0 {
		nemesis = []string{"script"}
	}
	// The request: harness.NewPlan gives it the pause that outlasts the
	// lease the backend grants, and the defaults of what a scenario does
	// not say (the retry pause, the operation timeout).
	cfg := harness.Config{
		Run: history.RunConfig{
			Backend: f.Backend, Variant: f.Variant, Workload: f.Workload, FenceSource: f.FenceSource,
			Resource: f.Resource, Nemesis: nemesis, Seed: 1, Clients: f.Clients, Think: f.Think,
			CommandLine: f.CommandLine(),
			Params:      params,
			Scenario:    &history.ScenarioInfo{Name: f.Name, Title: f.Title, Source: f.Source, Explain: f.Explain},
		},
		Target: f.target, Out: out, Programs: programs, TTL: ttl, Limit: f.TimeLimit.D(),
		// A step waits for its moment up to the whole run (a script has
		// no interval between faults).
		Interval: f.TimeLimit.D(), Think: f.Think, OpTimeout: f.OpTimeout.D(),
		Script: f.Actions(), Logger: slog.Default(),
	}
	if addrs := params[harness.ParamAddr]; addrs != "" {
		// The reproduction of a run against a service that was already
		// running (--addr) runs against that service again, under keys of
		// its own.
		cfg.Addrs = strings.Split(addrs, ",")
		cfg.KeyPrefix = harness.NewKeyPrefix()
		params[harness.ParamKeyPrefix] = cfg.KeyPrefix
	}
	return cfg
}

// Outcome is what running a scenario showed.
type Outcome struct {
	Dir        string
	Result     *checker.Result
	History    *history.History
	Comparison Comparison
}

// Run runs the scenario, checks it and compares the result with the
// expectations.
func Run(ctx context.Context, f *File, out string, programs catalog.Programs, runParams map[string]string) (Outcome, error) {
	plan, err := f.Plan(out, programs, runParams)
	if err != nil {
		return Outcome{}, err
	}
	run, err := harness.Run(ctx, plan)
	if err != nil {
		return Outcome{Dir: run.Dir}, err
	}
	if run.RecordingFailed != nil {
		return Outcome{Dir: run.Dir}, fmt.Errorf("scenario %s stopped: %w (run directory %s)", f.Name, run.RecordingFailed, run.Dir)
	}
	if run.Interrupted {
		return Outcome{Dir: run.Dir}, fmt.Errorf("scenario %s was interrupted", f.Name)
	}
	h, res, err := results.CheckDir(run.Dir, checker.Options{})
	if err != nil {
		return Outcome{Dir: run.Dir}, err
	}
	c := f.Compare(res)
	f.stepsNotRun(&c, run.StepsNotRun)
	return Outcome{Dir: run.Dir, Result: res, History: h, Comparison: c}, nil
}
