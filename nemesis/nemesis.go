// Package nemesis injects faults into a running test: it pauses, kills and
// continues named targets (lock service nodes and client processes) on a
// schedule fixed by a seed. A fault sees only targets and the capabilities
// the backend's handle offers, never a backend's internals; every fault it
// injects is an event in the history, and every step ends with a landing
// event saying whether the fault created the moment it exists for.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads"
)

// ErrMissed means a client gave up its hold without reaching the failpoint
// a fault aimed at (for example it skipped its write because its lease ran
// out).
var ErrMissed = errors.New("the client left its critical section without reaching the failpoint")

// Target is a process a fault can signal.
type Target interface {
	Name() string // c3, redis-0, ...
	PID() int
	Signal(sig syscall.Signal) error
}

// Client is a worker process running the workload.
type Client interface {
	Target
	// ParkAt arms failpoint and waits until the client is parked there. The
	// returned leave lets it go on. It fails with ErrMissed when the client
	// released the lock first.
	ParkAt(ctx context.Context, failpoint string) (leave func(), err error)
}

// Targets is what the running test offers the nemesis.
type Targets interface {
	// Holder is a client that holds a lock right now, if any.
	Holder() (Client, bool)
	Clients() []Client
	Nodes() []Target
	// Lookup finds a target by name: a node (redis-0) or a client by its
	// first process number (c0 is the worker that started as process 0,
	// whatever process number it has now).
	Lookup(name string) (Target, bool)
	// Service is the backend's own handle on the service (who leads now,
	// ...), or nil. Faults ask it for the methods they need.
	Service() any
}

// Restarter is a node that can be killed and started again on the same
// ports, with or without its data.
type Restarter interface {
	Target
	Restart(ctx context.Context, wipe bool) error
}

// Clock is a node whose wall clock can be moved on its own.
type Clock interface {
	Target
	SetClock(offset time.Duration) error
	Clock() time.Duration
}

// Env is what a fault works with.
type Env struct {
	Targets Targets
	// Record appends a nemesis event to the history.
	Record func(f string, v history.Value)
	Rand   *rand.Rand
	// Pause is how long a pause lasts.
	Pause time.Duration
	// Pauses, when not fixed, is the distribution each step draws its
	// Pause from, with the step's own seed.
	Pauses workloads.Distribution
	// Lease is the lease the lock under test really grants (the backend's,
	// for the run's --ttl: etcd rounds it up to whole seconds), for faults
	// that must act within one lease or outlast it when the holder reports
	// none of its own. It is not the TTL asked: the two differ (etcd, a
	// library's own default).
	Lease time.Duration
	// OpTimeout bounds each operation of a client: a command a client sent
	// to a stopped node has an unknown outcome by then.
	OpTimeout time.Duration
	// Failpoints are the moments inside the backend's own operations that
	// kill-client can aim at (for example between SETNX and EXPIRE).
	Failpoints []string
	// Settings are the run's fault settings (clock skew, restart delay, ...).
	Settings Settings
	// Patience bounds how long a fault waits for its moment (a holder, a
	// failpoint) before it gives up until the next step.
	Patience time.Duration
	// Network is the run's links between nodes and clients, or nil when
	// its connections do not go through lockcheck (the process runtime
	// with --network direct, the docker runtime).
	Network Network
}

// Step is one fault of a schedule.
type Step struct {
	At    time.Duration // since the start of the workload
	Fault string
	Seed  uint64 // the fault's own random choices
}

// Plan lays out a schedule: a fault every interval, drawn from faults, all
// fixed by seed.
func Plan(seed int64, faults []string, interval, limit time.Duration) []Step {
	if len(faults) == 0 || interval <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6e656d65736973))
	var steps []Step
	for at := interval; at < limit; at += interval {
		steps = append(steps, Step{At: at, Fault: faults[rng.IntN(len(faults))], Seed: rng.Uint64()})
	}
	return steps
}

// Window is the share of a plan's steps from from (included) to to
// (excluded), timed from from: a soak draws one plan for its whole
// duration and runs each segment's window of it. It is never nil, so that
// a window with no step is still the schedule (harness.Config.Steps).
func Window(steps []Step, from, to time.Duration) []Step {
	out := []Step{}
	for _, s := range steps {
		if s.At >= from && s.At < to {
			s.At -= from
			out = append(out, s)
		}
	}
	return out
}

// Run fires the steps of a plan in order, each no earlier than its time,
// until ctx is done. base is the template every step's Env copies. Every
// step ends with a landing event.
func Run(ctx context.Context, steps []Step, start time.Time, base Env) error {
	for i, s := range steps {
		if !sleepUntil(ctx, start.Add(s.At)) {
			return nil
		}
		env := forStep(base, i+1, s.Seed)
		f, ok := registry[s.Fault]
		if !ok {
			return fmt.Errorf("unknown fault %q", s.Fault)
		}
		l, err := f.Inject(ctx, &env)
		recordLanding(ctx, &env, s.Fault, l, err)
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("%s: %w", s.Fault, err)
		}
	}
	return nil
}

// forStep is base for step number step: its events carry the step, its
// random choices come from seed.
func forStep(base Env, step int, seed uint64) Env {
	env := base
	env.Rand = rand.New(rand.NewPCG(seed, 0))
	if !base.Pauses.Fixed() {
		// A stream of its own, so that the fault's choices are those of
		// a run with a fixed pause.
		env.Pause = base.Pauses.Draw(rand.New(rand.NewPCG(seed, 1)))
	}
	env.Record = func(f string, v history.Value) {
		v.Step = history.Int(step)
		base.Record(f, v)
	}
	return env
}

// recordLanding ends a step with its landing event. A fault that failed,
// or that the end of the run cut short before it landed, missed.
func recordLanding(ctx context.Context, env *Env, fault string, l Landing, err error) {
	switch {
	case err != nil && ctx.Err() == nil:
		l = missed("%s", err.Error())
	case !l.Landed && l.Why == "" && ctx.Err() != nil:
		l = missed("the run ended before the fault's moment came")
	case !l.Landed && l.Why == "":
		l = missed("the fault did not say why")
	}
	env.Record(history.NemLanding, history.Value{Fault: fault, Landed: history.Bool(l.Landed), Detail: l.Why})
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
