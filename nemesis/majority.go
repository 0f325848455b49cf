package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads"
)

func init() {
	register(Fault{Name: "clock-pause", Inject: ClockPause, Needs: []Capability{CapMajority, CapRestart, CapAllClocks, CapWipe},
		Params: []string{ParamSkew},
		Help: "Kleppmann's Redlock case: SIGSTOP a minority of the nodes, let a client win the lock on the " +
			"bare majority, jump one of those nodes' clocks by --skew, bring the minority back empty, let a second client win it"})
	register(Fault{Name: "restart-pause", Inject: RestartPause, Needs: []Capability{CapMajority, CapRestart, CapWipe},
		Params: []string{ParamRestartDelay, ParamWipe},
		Help: "Redlock's restart case: as clock-pause, but the node of the bare majority is killed and, " +
			"like the minority, started again empty after --restart-delay (longer than the TTL is the documented mitigation)"})
}

// ClockPause is Kleppmann's case against Redlock: one node of a bare
// majority forgets the holder's key because its wall clock jumps forward by
// the skew (Redis expiry reads the wall clock). The clock is put back after
// env.Pause. See splitMajority for the steps. It lands when a second
// client was granted the lock while the first one's lease was live.
func ClockPause(ctx context.Context, env *Env) (Landing, error) {
	skew := env.Settings.Clock.Skew
	// The stopped minority comes back at once: only the clock is on trial.
	return splitMajority(ctx, env, 0, func(ctx context.Context, n Target) (func(), error) {
		c, ok := n.(Clock)
		if !ok {
			return nil, ErrNoClock
		}
		if _, err := jumpClock(ctx, env, c, skew); err != nil {
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
// node can grant again. With a shorter delay it lands as clock-pause does;
// with the mitigation it lands when the nodes stayed down past the lease.
func RestartPause(ctx context.Context, env *Env) (Landing, error) {
	delay, wipe := env.Settings.RestartDelay, env.Settings.Wipe
	detail := env.Settings.wipeDetail()
	// The stopped minority restarts empty too, so it waits out the same
	// delay: the mitigation holds for every node that forgets.
	return splitMajority(ctx, env, delay, func(ctx context.Context, n Target) (func(), error) {
		r, ok := n.(Restarter)
		if !ok {
			return nil, errNoRestart
		}
		if err := kill(env, r, history.Value{Detail: detail}); err != nil {
			return nil, err
		}
		restarted := make(chan error, 1)
		go func() {
			sleepCtx(ctx, delay)
			restarted <- restart(ctx, env, r, wipe, detail)
		}()
		return func() { <-restarted }, nil
	})
}

var errNoRestart = errors.New("the nodes of this service cannot be restarted")

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
//     the minority), then let A go on. How long that takes depends on this
//     machine (a container restart takes 0.3 s on one, 1.5 s on another),
//     so A is held until B comes or A's lease is about to end, whichever is
//     first: holding it past its lease would be a client pause, another
//     fault.
//
// The fault lands when B was granted within A's lease. When it was not
// because the minority came back too late, the landing says how late and
// the smallest TTL that would have left room. forget returns what undoes
// it (reset the clock, wait for the restart), which runs last.
func splitMajority(ctx context.Context, env *Env, minorityDelay time.Duration, forget func(context.Context, Target) (func(), error)) (Landing, error) {
	nodes := env.Targets.Nodes()
	if len(nodes) < 3 {
		return Landing{}, fmt.Errorf("a bare majority needs at least three nodes; the service has %d", len(nodes))
	}
	order := env.Rand.Perm(len(nodes))
	minority := (len(nodes) - 1) / 2
	stopped := make([]Restarter, 0, minority)
	for _, i := range order[:minority] {
		r, ok := nodes[i].(Restarter)
		if !ok {
			return Landing{}, errNoRestart
		}
		stopped = append(stopped, r)
	}
	forgetful := nodes[order[minority]]

	for _, n := range stopped {
		if _, err := stop(env, n, history.Value{Detail: "so that grants land on the other nodes"}); err != nil {
			return Landing{}, err
		}
	}
	// An acquire begun before the stop may still be granted by the stopped
	// nodes' replies; it has ended by the time the node timeout (TTL/10 by
	// default) has passed twice.
	settled := time.Now().Add(env.Lease / 5)
	// The stopped nodes come back whatever happens below, and the fault
	// ends only once they are back.
	var (
		back     sync.Once
		killedAt time.Time
		backAt   = make(chan time.Time, 1)
	)
	bringBack := func() {
		back.Do(func() {
			killedAt = time.Now()
			go func() {
				killRestartAll(ctx, env, stopped, minorityDelay)
				backAt <- time.Now()
			}()
		})
	}
	var minorityBack time.Time
	waitBack := func() time.Time {
		if minorityBack.IsZero() {
			minorityBack = <-backAt
		}
		return minorityBack
	}
	defer func() {
		bringBack()
		waitBack()
	}()

	a, leave, err := parkFreshHolder(ctx, env, workloads.FailpointBeforeLeaseCheck, settled)
	if err != nil || a == nil {
		return missed("no client was granted the lock on the bare majority within %s", env.Patience), err
	}
	defer leave()
	// A's lease ends a TTL after it asked, less the checker's clock
	// allowance: a second grant before then is one the checker finds
	// inside A's lease. A client that cannot say when it asked was granted
	// just before it reached the failpoint; a fifth of the TTL covers its
	// acquire (it waited out the stopped nodes' timeout, a tenth of the TTL).
	lease := leaseOf(env, a) // the lease a was granted, as its lock reported it
	granted, now := time.Now(), history.Now()
	guessed, _ := history.LeaseEnds(now, now, lease, lease/5)
	leaseEnd, ends := granted.Add(time.Duration(guessed-now)), int64(0)
	if gt, ok := a.(GrantTimes); ok {
		if invoke, _ := gt.Grant(); invoke > 0 {
			ends, _ = history.LeaseEnds(invoke, invoke, lease, history.ClockAllowance(lease))
			leaseEnd = time.Now().Add(time.Duration(ends - history.Now()))
		}
	}
	undo, err := forget(ctx, forgetful)
	if err != nil {
		return Landing{}, err
	}
	defer undo()
	bringBack()
	b, seen := waitOtherHolder(ctx, env, a, time.Until(leaseEnd))
	leave()
	if gt, ok := b.(GrantTimes); ok && ends > 0 {
		if _, bOK := gt.Grant(); bOK >= ends {
			return missed("%s was granted the lock %s after %s's lease had ended", b.Name(),
				time.Duration(bOK-ends).Round(time.Millisecond), a.Name()), nil
		}
	}
	if b != nil {
		return landed("%s was granted the lock %s after %s, within %s's %s lease", b.Name(),
			seen.Sub(granted).Round(time.Millisecond), a.Name(), a.Name(), lease), nil
	}
	if ctx.Err() != nil {
		return missed("the run ended while %s held the lock", a.Name()), nil
	}
	up := waitBack()
	if minorityDelay >= lease {
		return landed("the nodes stayed down %s, past %s's %s lease: the documented mitigation is what was tested",
			up.Sub(killedAt).Round(time.Millisecond), a.Name(), lease), nil
	}
	if up.After(leaseEnd) {
		return missed("the minority came back %s after the kill; %s's lease had %s left; a --ttl of at least %s would let a second client in within it",
			up.Sub(killedAt).Round(time.Millisecond), a.Name(), leaseEnd.Sub(killedAt).Round(time.Millisecond),
			SmallestTTL(up.Sub(granted))), nil
	}
	return missed("the minority was back %s after the kill, with %s of %s's lease left, but no other client was granted the lock in that time",
		up.Sub(killedAt).Round(time.Millisecond), leaseEnd.Sub(up).Round(time.Millisecond), a.Name()), nil
}

// GrantTimes is a client that says when its latest grant was asked for and
// given, on the history's clock (history.Now), so that a fault judges a
// lease as the checker will: from the acquire's invoke.
type GrantTimes interface {
	Grant() (invoke, ok int64)
}

// LeaseGranted is a client that says the lease of its latest grant as
// the lock reported it (acquire's ttl_ms, renewed by its extends), so that
// a fault judged against a lease reads the lease the library was granted,
// never the TTL the run asked for: a library may ask for its own (60 s).
type LeaseGranted interface {
	GrantedLease() time.Duration
}

// leaseOf is the lease t's latest grant reported, or env.Lease, the lease
// the backend grants for the TTL asked, when t says none (a node, a lock
// whose grant lasts until it is released).
func leaseOf(env *Env, t Target) time.Duration {
	if g, ok := t.(LeaseGranted); ok {
		if d := g.GrantedLease(); d > 0 {
			return d
		}
	}
	return env.Lease
}

// SmallestTTL is the shortest lease within which a second client can be
// granted when the nodes it needs are back `needed` after the first grant:
// the lease must outlast that by the fifth splitMajority keeps in hand, and
// by the second client's own acquire. Rounded up to a tenth of a second.
func SmallestTTL(needed time.Duration) time.Duration {
	const acquire = 100 * time.Millisecond
	ttl := (needed + acquire) * 5 / 4
	return (ttl + 99*time.Millisecond).Truncate(100 * time.Millisecond)
}

// waitOtherHolder waits up to limit for a client other than a to hold the
// lock, and says when it saw it. Targets that cannot list holders make it
// wait out the limit and find none.
func waitOtherHolder(ctx context.Context, env *Env, a Client, limit time.Duration) (Client, time.Time) {
	lister, ok := env.Targets.(HolderLister)
	if !ok {
		sleepCtx(ctx, limit)
		return nil, time.Time{}
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for ctx.Err() == nil {
		for _, c := range lister.Holders() {
			if c != a {
				return c, time.Now()
			}
		}
		sleepCtx(ctx, time.Millisecond)
	}
	return nil, time.Time{}
}

// killRestartAll kills the stopped nodes, whatever they had queued dying
// with them, and starts them again empty after delay, all together: a kill
// or a start can take a quarter of a second each (a container's), and the
// lease is running.
func killRestartAll(ctx context.Context, env *Env, nodes []Restarter, delay time.Duration) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A node that cannot be killed is reported when it cannot come
			// back; a failed restart is recorded by restart.
			kill(env, n, history.Value{Detail: "killed while stopped: a restart drops the SETs queued in its sockets, which SIGCONT would apply"}) //nolint:errcheck
			sleepCtx(ctx, delay)
			restart(ctx, env, n, true, DetailWiped) //nolint:errcheck
		}()
	}
	wg.Wait()
}
