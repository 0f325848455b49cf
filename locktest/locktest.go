// Package locktest runs lockcheck against your lock from go test: Run
// starts the clients, runs the counter workload with the faults you ask
// for, checks the history and fails the test with the verdict's reason.
//
// Clients are worker processes by default: the test binary started again,
// running only the test that called Run, up to its call of Run, where it
// becomes a client of your lock. A pause is then a real SIGSTOP of your
// code and a kill a real SIGKILL. That needs the package's TestMain to hand
// the binary to Main:
//
//	func TestMain(m *testing.M) { locktest.Main(m) }
//
// Keep what a test does before Run cheap and free of side effects (let
// Options.Topology start the servers): a worker does it too.
//
// Options.InProcess runs the clients as goroutines of the test instead, for
// unit-test speed. That is a weaker fault: a goroutine cannot be stopped,
// so a pause is a stall at the next failpoint the client reaches (the
// workload's before-write, where pause-holder aims anyway, or one of your
// lock's own), and a client cannot be killed (kill-client is refused).
// A stall at a failpoint finds a window that depends on where the client
// stopped; a SIGSTOP also stops your lock's background goroutines (a
// lease's keep-alive), which a stall does not.
//
// The run directory (history, results.json, report.html) is written under
// the test's t.ArtifactDir(): run go test -artifacts to keep it (in
// -outputdir), otherwise it is removed with the test.
package locktest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lockcheck/lockcheck"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/nemesis"
	"github.com/lockcheck/lockcheck/results"
	"github.com/lockcheck/lockcheck/scenario"
)

// Options says what a test runs. The zero value runs 3 clients for 5 s
// with a 500 ms TTL and no fault, in worker processes, against a lock that
// needs no server lockcheck starts.
type Options struct {
	// Topology names a built-in backend (redis, sentinel, redlock, etcd,
	// zookeeper, postgres) whose servers lockcheck starts for the test and
	// hands your lock in Config.Addrs.
	Topology string
	// Addrs are a service that is already running (one the test started),
	// instead of a Topology: lockcheck puts its keys under a prefix of its
	// own and runs only faults that need no node.
	Addrs []string
	// Failpoints are the moments your lock declares (Config.Failpoint.Hit)
	// that faults and scenarios may aim at.
	Failpoints []string
	// Nemesis are the faults to inject, by the names of lockcheck run
	// --nemesis (pause-holder, pause-client, kill-client, ...).
	Nemesis []string
	// Scenario, if set, is a scenario file (lockcheck scenario run's
	// format): its timeline replaces Nemesis, its settings the ones below,
	// and the test passes when its expectations are met instead of when the
	// verdict is true. Its backend field is ignored; its variant is your
	// lock's Config.Variant.
	Scenario string
	// Clients (3), TTL (500ms), TimeLimit (5s) and Seed (1) are as the
	// flags of lockcheck run; a zero one is the run's default
	// (harness.Defaults), Seed's 1.
	Clients   int
	TTL       time.Duration
	TimeLimit time.Duration
	Seed      int64
	// Workload ("unfenced"), FenceSource ("lock"), Resource ("memory"),
	// Keys (1), Think ("20ms"), Retry (10ms), OpTimeout (1s), Pause (twice
	// the lease the lock grants: the TTL, unless its backend declares a
	// Lease), NemesisInterval (the pause and a second) and
	// LinearizabilityTimeout (10s) are the flags of lockcheck run of the
	// same names (--workload, --fence-source, ...), with their defaults.
	Workload               string
	FenceSource            string
	Resource               string
	Keys                   int
	Think                  string
	Retry                  time.Duration
	OpTimeout              time.Duration
	Pause                  time.Duration
	NemesisInterval        time.Duration
	LinearizabilityTimeout time.Duration
	// Params are the other flags of lockcheck run, by name: fault
	// settings ({"skew": "-20s", "restart-delay": "1s", "wipe": "true"}),
	// the watchdog ({"watchdog": "true"}), the network ({"network":
	// "proxy"}).
	Params map[string]string
	// Variant is the variant your Open sees in Config.Variant ("default").
	Variant string
	// Fences and LeasesUntilRelease say what your lock does, as
	// lockcheck.Backend's fields of the same names: its grants carry a
	// fence, and a grant with no TTL lasts until it is released.
	Fences             bool
	LeasesUntilRelease bool
	// InProcess runs the clients as goroutines of the test: faster, and
	// its pause is the weaker fault the package documentation describes.
	InProcess bool
}

// Result is what the checker found.
type Result struct {
	// Verdict is "true", "false" or "unknown".
	Verdict string
	// Reason is the verdict in one sentence.
	Reason string
	// Failed are the checks that failed, as results.json names them
	// (lease_safety, double_ownership, ...).
	Failed []string
	// Dir is the run directory, with report.html.
	Dir string
}

// Open builds one client of your lock, as lockcheck.Backend.Open does.
type Open = func(lockcheck.Config) (lockcheck.Lock, error)

// testEnv names, in a worker process's environment, the test whose Run
// started it.
const testEnv = "LOCKTEST_RUN"

// withWorkers is set by Main: the test binary can run worker processes.
var withWorkers bool

// Main runs the package's tests, or, in a worker process Run started, the
// one test that started it up to its Run, which then runs the worker. Call
// it from TestMain.
func Main(m *testing.M) {
	if catalog.RunNodeFromEnv() { // a node that is lockcheck itself (an etcd member)
		return
	}
	if test := os.Getenv(testEnv); test != "" && os.Getenv(harness.WorkerEnv) != "" {
		flag.Parse()
		if err := flag.Set("test.run", runPattern(test)); err != nil {
			fmt.Fprintln(os.Stderr, "locktest worker:", err)
			os.Exit(3)
		}
	}
	withWorkers = true
	os.Exit(m.Run())
}

// runPattern is the -test.run pattern that selects exactly the test named
// name (a subtest's name has one part per level).
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// Run tests the lock open builds, as opts say, and fails t with the
// verdict's reason (or the scenario's unmet expectations). It returns what
// the checker found, for further assertions.
func Run(t testing.TB, open Open, opts Options) Result {
	t.Helper()
	name := backendName(t.Name())
	if os.Getenv(testEnv) == t.Name() && os.Getenv(harness.WorkerEnv) != "" {
		if _, _, err := opts.config(name, "", open); err != nil {
			fmt.Fprintln(os.Stderr, "locktest worker:", err)
			os.Exit(3)
		}
		harness.RunWorkerFromEnv() // exits with status 3 on error
		os.Exit(0)
	}
	if !claim(t) {
		t.Fatal("locktest: Run was called twice in one test; give each run a subtest of its own")
	}
	if !opts.InProcess && !withWorkers {
		t.Fatal("locktest: worker processes need func TestMain(m *testing.M) { locktest.Main(m) } in the package (or set Options.InProcess)")
	}
	if opts.InProcess && slices.Contains(opts.Nemesis, "kill-client") {
		t.Fatal("locktest: kill-client needs worker processes: a client running in the test process cannot be killed")
	}
	cfg, expect, err := opts.config(name, t.ArtifactDir(), open)
	if err != nil {
		t.Fatalf("locktest: %v", err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	if !opts.InProcess {
		cfg.WorkerEnv = []string{testEnv + "=" + t.Name()}
	}
	out, err := harness.Run(context.Background(), cfg)
	switch {
	case err != nil && out.Dir == "":
		t.Fatalf("locktest: %v", err) // refused before it started
	case err != nil:
		t.Fatalf("locktest: the run failed: %v (run directory %s)", err, out.Dir)
	}
	_, res, err := results.CheckDir(out.Dir, checker.Options{LinearizabilityTimeout: opts.LinearizabilityTimeout})
	if err != nil {
		t.Fatalf("locktest: checking %s: %v", out.Dir, err)
	}
	r := Result{Verdict: res.Valid.String(), Reason: res.Reason, Dir: out.Dir}
	for _, c := range res.Checks.List() {
		if c.Check.Judge(checker.JudgeContext{Fenced: cfg.Run.Fenced(), T0: res.Span.Start}).Status == checker.StatusFailed {
			r.Failed = append(r.Failed, c.Key)
		}
	}
	report := fmt.Sprintf("report: %s%s", filepath.Join(r.Dir, results.ReportFile), keptHint())
	var mismatches []scenario.Mismatch
	if expect != nil {
		mismatches = expect.Compare(res).Mismatches
	}
	switch {
	case len(mismatches) > 0:
		for _, m := range mismatches {
			t.Errorf("locktest: scenario %s: %s: expected %s, observed %s", expect.Name, m.What, m.Expected, m.Observed)
		}
		t.Logf("locktest: verdict %s: %s (%s)", r.Verdict, r.Reason, report)
	case expect == nil && res.Valid != checker.Valid:
		t.Errorf("locktest: verdict %s: %s (%s)", r.Verdict, r.Reason, report)
	default:
		t.Logf("locktest: verdict %s: %s (%s)", r.Verdict, r.Reason, report)
	}
	return r
}

// keptHint says, unless go test keeps the test's artifacts, that the run
// directory goes with the test and how to keep it.
func keptHint() string {
	if f := flag.Lookup("test.artifacts"); f != nil && f.Value.String() == "true" {
		return ""
	}
	return "; removed when the test ends: run go test -artifacts to keep it"
}

// config is the run opts describe, under out, of open registered as the
// backend name, and the scenario whose expectations judge it, if any.
func (opts Options) config(name, out string, open Open) (harness.Config, *scenario.File, error) {
	if opts.Scenario != "" {
		data, variant, err := renameScenario(opts.Scenario, name)
		if err != nil {
			return harness.Config{}, nil, err
		}
		// Parsing checks the variant and the failpoints against the
		// backend: it is registered first.
		register(name, cmp.Or(variant, defaultVariant), open, opts)
		f, err := scenario.Parse(opts.Scenario, data)
		if err != nil {
			return harness.Config{}, nil, err
		}
		req := f.Config(out, nil, nil)
		req.InProcess = opts.InProcess
		plan, err := harness.NewPlan(opts.withAddrs(req, name))
		return plan, f, err
	}
	if _, err := nemesis.Parse(strings.Join(opts.Nemesis, ",")); err != nil {
		return harness.Config{}, nil, err
	}
	variant := cmp.Or(opts.Variant, defaultVariant)
	register(name, variant, open, opts)
	// The request; harness.NewPlan gives what opts leave zero the run's
	// defaults (harness.Defaults), and the pause that outlasts the lease.
	cfg := harness.Config{
		Run: history.RunConfig{
			Backend: name, Variant: variant, Workload: opts.Workload, FenceSource: opts.FenceSource, Resource: opts.Resource,
			Nemesis: opts.Nemesis, Seed: cmp.Or(opts.Seed, 1), Clients: opts.Clients, Keys: opts.Keys,
			CommandLine: []string{"go", "test", "-run", runPattern(name)}, Params: map[string]string{},
		},
		Out: out, TTL: opts.TTL, Limit: opts.TimeLimit, Pause: opts.Pause, Interval: opts.NemesisInterval,
		Think: opts.Think, Retry: opts.Retry, OpTimeout: opts.OpTimeout, InProcess: opts.InProcess,
	}
	maps.Copy(cfg.Run.Params, opts.Params)
	plan, err := harness.NewPlan(opts.withAddrs(cfg, name))
	return plan, nil, err
}

// defaultVariant is the variant of a lock registered with none, as
// lockcheck.Register names it.
const defaultVariant = "default"

// withAddrs points cfg at the service opts.Addrs, if given, under a key
// prefix of the run's own.
func (opts Options) withAddrs(cfg harness.Config, name string) harness.Config {
	if len(opts.Addrs) == 0 {
		return cfg
	}
	id := make([]byte, 3)
	rand.Read(id)
	cfg.Addrs, cfg.KeyPrefix = opts.Addrs, "locktest:"+name+"-"+hex.EncodeToString(id)+":"
	cfg.Run.Params[harness.ParamAddr] = strings.Join(opts.Addrs, ",")
	cfg.Run.Params[harness.ParamKeyPrefix] = cfg.KeyPrefix
	return cfg
}

// renameScenario reads the scenario file at path and makes it one of the
// backend name; it returns the file and its variant.
func renameScenario(path, name string) ([]byte, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return data, "", nil // scenario.Parse says what is wrong with it
	}
	root := doc.Content[0]
	variant := ""
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch root.Content[i].Value {
		case "backend":
			root.Content[i+1].Value = name
		case "variant":
			variant = root.Content[i+1].Value
		}
	}
	data, err = yaml.Marshal(&doc)
	return data, variant, err
}

// registry holds the lock each test registered, by backend name: a test
// run again (-count) registers its name again, with its new open.
var registry = struct {
	sync.Mutex
	opens map[string]Open
	// running are the tests in which Run was called.
	running map[testing.TB]bool
}{opens: map[string]Open{}, running: map[testing.TB]bool{}}

// register makes open the backend name, with one variant.
func register(name, variant string, open Open, opts Options) {
	registry.Lock()
	defer registry.Unlock()
	_, known := registry.opens[name]
	registry.opens[name] = open
	if known {
		return
	}
	lockcheck.Register(lockcheck.Backend{
		Name: name, Variants: []string{variant}, Failpoints: map[string][]string{variant: opts.Failpoints}, Topology: opts.Topology,
		Fences: opts.Fences, LeasesUntilRelease: opts.LeasesUntilRelease,
		Open: func(c lockcheck.Config) (lockcheck.Lock, error) {
			registry.Lock()
			open := registry.opens[name]
			registry.Unlock()
			return open(c)
		},
	})
}

// claim records that t runs its Run, and reports false if it did already.
func claim(t testing.TB) bool {
	registry.Lock()
	defer registry.Unlock()
	if registry.running[t] {
		return false
	}
	registry.running[t] = true
	t.Cleanup(func() {
		registry.Lock()
		delete(registry.running, t)
		registry.Unlock()
	})
	return true
}

// backendName is the backend a test's lock is registered as: its name,
// with what a run directory's name cannot hold replaced.
func backendName(test string) string {
	return regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(test, "-")
}
