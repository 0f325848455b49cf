package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads"
)

func init() {
	Faults["clock-pause"] = ClockPause
	Describe["clock-pause"] = "Kleppmann's Redlock case: SIGSTOP a minority of the nodes, let a client win the lock on the " +
		"bare majority, jump one of those nodes' clocks by --skew, bring the minority back empty, let a second client win it"
	Faults["restart-pause"] = RestartPause
	Describe["restart-pause"] = "Redlock's restart case: as clock-pause, but the node of the bare majority is killed and, " +
		"like the minority, started again empty after --restart-delay (longer than the TTL is the documented mitigation)"
}

// ClockPause is Kleppmann's case against Redlock: one node of a bare
// majority forgets the holder's key because its wall clock jumps forward by
// the skew (Redis expiry reads the wall clock). The clock is put back after
// env.Pause. See splitMajority for the steps.
func ClockPause(ctx context.Context, env *Env) error {
	s, err := ClockSettings(env.Params)
	if err != nil {
		return err
	}
	// The stopped minority comes back at once: only the clock is on trial.
	return splitMajority(ctx, env, func(n Target) bool { _, ok := n.(Clock); return ok }, ErrNoClock, 0,
		func(ctx context.Context, n Target) (func(), error) {
			c := n.(Clock)
			if err := jumpClock(ctx, env, c, s.Skew); err != nil {
				return nil, err
			}
			return func() {
				sleepCtx(ctx, env.Pause)
				resetClock(ctx, env, c)
			}, nil
		})
}

// RestartPause is the restart case against Redlock: one node of a bare
// majority forgets the holder's key because it is killed and started again
// with no data, after the restart delay. A delay longer than the TTL is the
// documented mitigation: the holder's lease has run out by the time the
// node can grant again.
func RestartPause(ctx context.Context, env *Env) error {
	delay, err := restartDelay(env)
	if err != nil {
		return err
	}
	wipe := env.Params[ParamWipe] == "true"
	// The stopped minority restarts empty too, so it waits out the same
	// delay: the mitigation holds for every node that forgets.
	return splitMajority(ctx, env, func(n Target) bool { _, ok := n.(Restarter); return ok }, errNoRestart, delay,
		func(ctx context.Context, n Target) (func(), error) {
			r := n.(Restarter)
			detail := "data kept"
			if wipe {
				detail = "data wiped"
			}
			pid := r.PID()
			if err := r.Signal(syscall.SIGKILL); err != nil {
				return nil, err
			}
			env.Record(history.NemKill, history.Value{Target: r.Name(), PID: pid, Detail: detail})
			restarted := make(chan error, 1)
			go func() {
				sleepCtx(ctx, delay)
				// The node must come back even when the run is ending.
				err := r.Restart(context.WithoutCancel(ctx), wipe)
				if err == nil {
					env.Record(history.NemStart, history.Value{Target: r.Name(), PID: r.PID(), Detail: detail})
				}
				restarted <- err
			}()
			return func() {
				if err := <-restarted; err != nil {
					env.Record(history.NemStart, history.Value{Target: r.Name(), Detail: "restart failed: " + err.Error()})
				}
			}, nil
		})
}

var errNoRestart = errors.New("the nodes of this service cannot be restarted")

// restartDelay reads --restart-delay.
func restartDelay(env *Env) (time.Duration, error) {
	s := env.Params[ParamRestartDelay]
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s %q: want a duration such as 1s", ParamRestartDelay, s)
	}
	return d, nil
}

// splitMajority is the schedule every Redlock double grant needs, step by
// step:
//
//  1. SIGSTOP a minority of the nodes, so that the next grant lands on the
//     bare majority of the others;
//  2. wait for a client A to be granted the lock while they are stopped, and
//     hold A in its critical section (at the failpoint before its lease
//     check: A is slow, not stopped, and still skips its write if its lease
//     ran out meanwhile);
//  3. make one node of A's majority forget A's key (forget: a clock jump, a
//     restart with no data);
//  4. bring the stopped minority back empty by a restart, after
//     minorityDelay. SIGCONT would not do: a stopped Redis applies the SETs
//     queued in its sockets when it runs again, A's among them, and that
//     protects A's lock on them;
//  5. wait for another client B to hold the lock (on the forgetful node and
//     the minority), then let A go on. A is held at most half a TTL, so it
//     goes on well within its validity even when B never comes (a restart
//     delay longer than the TTL): holding it longer would be a client pause,
//     another fault.
//
// forget returns what undoes it (reset the clock, wait for the restart),
// which runs last. usable says which nodes forget can act on; unusable is
// the error when some cannot.
func splitMajority(ctx context.Context, env *Env, usable func(Target) bool, unusable error, minorityDelay time.Duration,
	forget func(context.Context, Target) (func(), error)) error {
	nodes := env.Targets.Nodes()
	if len(nodes) < 3 {
		return fmt.Errorf("a bare majority needs at least three nodes; the service has %d", len(nodes))
	}
	for _, n := range nodes {
		if _, ok := n.(Restarter); !ok || !usable(n) {
			return unusable
		}
	}
	order := env.Rand.Perm(len(nodes))
	minority := (len(nodes) - 1) / 2
	stopped := make([]Restarter, 0, minority)
	for _, i := range order[:minority] {
		stopped = append(stopped, nodes[i].(Restarter))
	}
	forgetful := nodes[order[minority]]

	for _, n := range stopped {
		if err := n.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		env.Record(history.NemPause, history.Value{Target: n.Name(), PID: n.PID(), Detail: "so that grants land on the other nodes"})
	}
	// An acquire begun before the stop may still be granted by the stopped
	// nodes' replies; it has ended by the time the node timeout (TTL/10 by
	// default) has passed twice.
	settled := time.Now().Add(env.TTL / 5)
	// The stopped nodes come back whatever happens below, and the fault
	// ends only once they are back.
	var back sync.Once
	returned := make(chan error, 1)
	bringBack := func() {
		back.Do(func() {
			killStopped(env, stopped)
			go func() {
				sleepCtx(ctx, minorityDelay)
				returned <- restartAll(ctx, env, stopped)
			}()
		})
	}
	defer func() {
		bringBack()
		if err := <-returned; err != nil {
			env.Record(history.NemStart, history.Value{Detail: "restart failed: " + err.Error()})
		}
	}()

	a, leave, err := parkFreshHolder(ctx, env, workloads.FailpointBeforeLeaseCheck, settled)
	if err != nil || a == nil {
		return err
	}
	defer leave()
	hold := env.TTL / 2
	if hold <= 0 {
		hold = env.Pause
	}
	holdUntil := time.Now().Add(hold)
	undo, err := forget(ctx, forgetful)
	if err != nil {
		return err
	}
	defer undo()
	bringBack()
	waitOtherHolder(ctx, env, a, time.Until(holdUntil))
	leave()
	return nil
}

// parkFreshHolder waits for a client granted the lock after this call began
// (a moment with no holder, no earlier than settled, then a holder) and
// parks it at failpoint. It returns a nil client when none came within
// env.Patience. On a badly loaded machine a grant whose nodes all answered
// before the minority stopped can still be reported late enough to be
// taken; the restart of the minority then makes those nodes forget too,
// and the report names them.
func parkFreshHolder(ctx context.Context, env *Env, failpoint string, settled time.Time) (Client, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, env.Patience)
	defer cancel()
	free := false
	for ctx.Err() == nil {
		c, ok := env.Targets.Holder()
		switch {
		case !ok:
			free = time.Now().After(settled)
		case free:
			leave, err := c.ParkAt(ctx, failpoint)
			if errors.Is(err, ErrMissed) {
				free = false
				continue
			}
			if err != nil {
				return nil, nil, ignoreDeadline(err)
			}
			var once sync.Once
			return c, func() { once.Do(leave) }, nil
		}
		sleepCtx(ctx, time.Millisecond)
	}
	return nil, nil, nil
}

// waitOtherHolder waits up to limit for a client other than a to hold the
// lock. Targets that cannot list holders make it wait out the limit.
func waitOtherHolder(ctx context.Context, env *Env, a Client, limit time.Duration) {
	lister, ok := env.Targets.(HolderLister)
	if !ok {
		sleepCtx(ctx, limit)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for ctx.Err() == nil {
		for _, c := range lister.Holders() {
			if c != a {
				return
			}
		}
		sleepCtx(ctx, time.Millisecond)
	}
}

// killStopped kills the stopped nodes: whatever they had queued dies with
// them.
func killStopped(env *Env, stopped []Restarter) {
	for _, n := range stopped {
		pid := n.PID()
		if err := n.Signal(syscall.SIGKILL); err != nil {
			continue // restartAll reports a node that cannot come back
		}
		env.Record(history.NemKill, history.Value{Target: n.Name(), PID: pid,
			Detail: "killed while stopped: a restart drops the SETs queued in its sockets, which SIGCONT would apply"})
	}
}

// restartAll starts the nodes again, empty, together.
func restartAll(ctx context.Context, env *Env, nodes []Restarter) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The node must come back even when the run is ending.
			if errs[i] = n.Restart(context.WithoutCancel(ctx), true); errs[i] == nil {
				env.Record(history.NemStart, history.Value{Target: n.Name(), PID: n.PID(), Detail: "data wiped"})
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
