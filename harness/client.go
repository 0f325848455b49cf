package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/program"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/nemesis"
	"github.com/lockcheck/lockcheck/results"
	"github.com/lockcheck/lockcheck/workloads"
)

// lockSpec is how a client opens the run's lock: for a lock client
// program, also what the program is told in init (each worker adds its
// slot, process and log).
func (r *run) lockSpec() catalog.Spec {
	cfg := r.cfg
	spec := catalog.Spec{
		Backend: cfg.Run.Backend, Variant: cfg.Run.Variant, TTL: cfg.TTL, Addrs: cfg.Addrs,
		Fence: cfg.Run.FenceSource == "lock", Timeout: cfg.OpTimeout, Extra: cfg.Run.Params,
	}
	if len(cfg.Addrs) == 0 {
		spec.Addrs = r.backend.Addrs(r.top.endpoints())
	}
	if c := r.backend.Client; c != nil {
		o := c.Options(cfg.Run.Backend)
		o.KeyPrefix, o.Stride, o.Nodes = cfg.KeyPrefix, cfg.Run.Clients, []program.NodeAddr{}
		if len(cfg.Addrs) == 0 {
			o.Nodes = nodeAddrs(r.top.endpoints())
		}
		spec.Program = &o
	}
	return spec
}

// probeClient starts the run's lock client program once, once the service
// serves and before anything is recorded, to learn what it says of itself:
// a command that does not start or does not answer init in time refuses
// the run here. Its declaration decides the fenced-run rule (Preflight's,
// again) and the failpoints a scenario may wait for, and goes into the
// history header (RunConfig.Client) and the versions the report shows.
func (r *run) probeClient(logDir string) error {
	c := r.backend.Client
	if c == nil {
		return nil
	}
	spec := r.spec
	o := *spec.Program
	o.Slot, o.Process = "c0", 0 // the first slot's program, before its worker starts it again
	o.LogPath = filepath.Join(logDir, results.LogsDir, "client-probe.log")
	spec.Program = &o
	lock, err := catalog.OpenProgram(spec, nil)
	if err != nil {
		return fmt.Errorf("%w (its stderr is in %s)", err, o.LogPath)
	}
	d := lock.Declaration()
	if err := lock.Close(); err != nil {
		r.log.Warn("lock client probe", "err", err)
	}
	// What the program declared is this run's, not the catalog's.
	r.backend = r.backend.Declare(d)
	r.cfg.Target = r.backend
	if err := checkFenceSource(r.cfg, r.backend); err != nil {
		return err
	}
	if err := checkReaches(r.cfg, d); err != nil {
		return err
	}
	r.cfg.Run.Client = &history.ClientInfo{
		Command: c.Command, Name: r.cfg.Run.Backend, Library: d.Library, Version: d.Version, Topology: c.Topology,
	}
	if r.cfg.Run.Versions == nil {
		r.cfg.Run.Versions = map[string]string{}
	}
	r.cfg.Run.Versions[d.Library] = d.Version
	spec.Program.Failpoints = aimedFailpoints(r.cfg, d)
	r.spec.Program.Failpoints = spec.Program.Failpoints
	return nil
}

// checkReaches refuses a scenario that waits for a client failpoint the
// program did not declare: the step would never run.
func checkReaches(cfg Config, d program.Declaration) error {
	for i, a := range cfg.Script {
		if a.When == nil || slices.Contains(clientMoments, a.When.Reaches) || slices.Contains(d.Failpoints, a.When.Reaches) {
			continue
		}
		return fmt.Errorf("step %d waits for %s to reach %q, which client %s does not declare (its init_ok failpoints: %s)",
			i+1, a.When.Client, a.When.Reaches, cfg.Run.Backend, orNoneList(d.Failpoints))
	}
	return nil
}

// clientMoments are the moments of the client loop itself.
var clientMoments = []string{nemesis.MomentAcquired, nemesis.MomentFailoverGrant, workloads.FailpointBeforeWrite, workloads.FailpointBeforeLeaseCheck, workloads.FailpointBeforeAcquire}

// aimedFailpoints are the declared failpoints some step of the run may
// wait for: a scenario's, or, in a run with faults, every declared one.
func aimedFailpoints(cfg Config, d program.Declaration) []string {
	if cfg.Script == nil {
		if len(cfg.Run.Nemesis) == 0 {
			return []string{}
		}
		return slices.Clone(d.Failpoints)
	}
	out := []string{}
	for _, a := range cfg.Script {
		if a.When != nil && slices.Contains(d.Failpoints, a.When.Reaches) && !slices.Contains(out, a.When.Reaches) {
			out = append(out, a.When.Reaches)
		}
	}
	return out
}

func orNoneList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// clientSpec is the lock spec of slot's worker, process: a lock client
// program is told its slot and process, and logs to its own file.
func (f *fleet) clientSpec(spec catalog.Spec, slot int, process history.Process) (catalog.Spec, error) {
	if spec.Program == nil {
		return spec, nil
	}
	o := *spec.Program
	o.Slot, o.Process = "c"+strconv.Itoa(slot), int(process)
	o.LogPath = filepath.Join(f.logDir, results.LogsDir, fmt.Sprintf("client-c%d.log", slot))
	if f.programLinks != nil {
		eps, err := f.programLinks.endpoints(slot, f.endpoints)
		if err != nil {
			return spec, err
		}
		spec.Addrs = f.cfg.Target.Addrs(eps)
		o.Nodes = nodeAddrs(eps)
	}
	spec.Program = &o
	return spec, nil
}

// nodeAddrs are what a program is told of each node: its name and the
// address of its first port.
func nodeAddrs(eps []backends.Endpoint) []program.NodeAddr {
	out := []program.NodeAddr{}
	for _, e := range eps {
		out = append(out, program.NodeAddr{Name: e.Name, Addr: e.Addr()})
	}
	return out
}

// awaitClients waits until every worker's lock client program answered
// init, so that the time limit starts with clients that can work (an
// interpreter takes a second to start). A worker that gave up first
// refuses the run.
func (f *fleet) awaitClients(timeout time.Duration) error {
	f.mu.Lock()
	slots := slices.Clone(f.slots)
	f.mu.Unlock()
	deadline := time.After(timeout)
	logs := filepath.Join(f.logDir, results.LogsDir)
	for i, w := range slots {
		select {
		case <-w.ready:
		case <-w.gone:
			why := w.failure()
			if why == "" {
				why = fmt.Sprintf("its worker exited before the program answered init (see worker-%d.log)", i)
			}
			return &ClientsNotStarted{Slot: i, Why: why, Logs: logs}
		case <-deadline:
			return &ClientsNotStarted{Slot: i, Why: fmt.Sprintf("no init_ok within %s", timeout), Logs: logs}
		}
		if err := w.failure(); err != "" {
			return &ClientsNotStarted{Slot: i, Why: err, Logs: logs}
		}
	}
	return nil
}

// ClientsNotStarted is what Run returns when a slot's lock client program
// failed or missed its init: the workload never began, so there is no
// history to check, and the program's own words (its error, its last line
// on stderr) are the message.
type ClientsNotStarted struct {
	Slot int
	Why  string
	// Logs is the folder of the workers' and programs' logs.
	Logs string
}

func (e *ClientsNotStarted) Error() string {
	return fmt.Sprintf("client slot c%d did not start: %s", e.Slot, e.Why)
}

// initWait is the wait a worker's lock client program may take to
// answer init.
func initWait(b catalog.Backend) time.Duration {
	if b.Client == nil || b.Client.InitTimeout <= 0 {
		return program.DefaultInitTimeout + 5*time.Second
	}
	return b.Client.InitTimeout + 5*time.Second
}

// ClientService starts the lock service of cfg, a run of a lock client
// program (its nodes, ready, under dir; or the service Config.Addrs
// names), for a check of the program (lockcheck client check), and
// returns how a client opens the lock and the function that tears it all
// down, which must be called.
func ClientService(ctx context.Context, cfg Config, dir string) (catalog.Spec, func(), error) {
	r := &run{cfg: cfg}
	prepared, backend, err := prepare(cfg)
	if err != nil {
		return catalog.Spec{}, func() {}, err
	}
	if backend.Client == nil {
		return catalog.Spec{}, func() {}, fmt.Errorf("backend %s is no lock client program", cfg.Run.Backend)
	}
	r.cfg, r.backend, r.log = prepared, backend, prepared.Logger
	r.procs = newProcs()
	r.undo = append(r.undo, func() { r.procs.killAll(5 * time.Second) })
	if err := os.MkdirAll(filepath.Join(dir, results.LogsDir), 0o755); err != nil {
		return catalog.Spec{}, r.teardown, err
	}
	if err := r.startService(ctx, filepath.Join(dir, "nodes")); err != nil {
		return catalog.Spec{}, r.teardown, err
	}
	return r.lockSpec(), r.teardown, nil
}
