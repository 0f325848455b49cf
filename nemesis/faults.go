package nemesis

import (
	"context"
	"fmt"
	"time"

	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads"
)

func init() {
	register(Fault{Name: "pause-holder", Inject: PauseHolder,
		Help: "SIGSTOP the client that holds the lock, right after it checked its lease, for --pause"})
	register(Fault{Name: "pause-client", Inject: PauseClient,
		Help: "SIGSTOP a random client at a random moment for --pause"})
	register(Fault{Name: "pause-node", Inject: PauseNode, Needs: []Capability{CapNodes},
		Help: "SIGSTOP a lock service node for --pause"})
	register(Fault{Name: "kill-client", Inject: KillClient,
		Help: "SIGKILL a client inside its critical section (between SETNX and EXPIRE for setnx-expire); it restarts as a new process"})
}

// PauseHolder stops the client that holds the lock right after it checked
// that its lease is still valid and before it writes, for longer than the
// lease: the stop-the-world pause of the articles. No client-side check can
// catch a pause that lands there. It lands when the holder stayed stopped
// past its TTL.
func PauseHolder(ctx context.Context, env *Env) (Landing, error) {
	c, leave, err := parkHolder(ctx, env, workloads.FailpointBeforeWrite)
	if err != nil || c == nil {
		return missed("no client held the lock and reached its write within %s", env.Patience), err
	}
	lease := leaseOf(env, c)
	held, err := stopFor(ctx, env, c, env.Pause, history.Value{Failpoint: workloads.FailpointBeforeWrite}, leave)
	if err != nil {
		return Landing{}, err
	}
	if held < lease {
		return missed("%s: its lease had not run out when it wrote", leaseOutlived(c, lease, held)), nil
	}
	l := landed("%s was stopped after its lease check for %s, past its %s lease", c.Name(), held.Round(time.Millisecond), lease)
	if held+5*time.Millisecond < env.Pause {
		l.Why += "; " + cutShortBy(held, env.Pause)
	}
	return l, nil
}

// PauseClient stops a random client wherever it is, for env.Pause.
func PauseClient(ctx context.Context, env *Env) (Landing, error) {
	clients := env.Targets.Clients()
	if len(clients) == 0 {
		return missed("no client was running"), nil
	}
	c := clients[env.Rand.IntN(len(clients))]
	holding, lease := holds(env, c), leaseOf(env, c)
	held, err := stopFor(ctx, env, c, env.Pause, history.Value{}, nil)
	if err != nil {
		return Landing{}, err
	}
	l := heldFor(env, c, c.Name()+" was stopped", held, env.Pause)
	if l.Landed && holding && held < lease {
		// A holder stopped for less than its lease wakes up with the lock
		// still its own: nothing was tested.
		return missed("%s", leaseOutlived(c, lease, held)), nil
	}
	return l, nil
}

// leaseOutlived says that c's lease outlasted its stop of held: the
// granted lease is what a pause must outlive, whatever the run asked.
func leaseOutlived(c Target, lease, held time.Duration) string {
	return fmt.Sprintf("%s's lease was %s, the pause %s", c.Name(), lease, held.Round(time.Millisecond))
}

// PauseNode stops a random node of the lock service for env.Pause.
func PauseNode(ctx context.Context, env *Env) (Landing, error) {
	nodes := env.Targets.Nodes()
	if len(nodes) == 0 {
		return missed("the service has no node"), nil
	}
	return pauseFor(ctx, env, nodes[env.Rand.IntN(len(nodes))])
}

// pauseFor stops t for env.Pause; it lands when t stayed stopped that long.
func pauseFor(ctx context.Context, env *Env, t Target) (Landing, error) {
	held, err := stopFor(ctx, env, t, env.Pause, history.Value{}, nil)
	if err != nil {
		return Landing{}, err
	}
	return heldFor(env, t, t.Name()+" was stopped", held, env.Pause), nil
}

// KillClient kills a client inside its critical section. Where the backend
// has a failpoint inside acquire (SETNX before EXPIRE), it aims there, so the
// lock is left without an expiry; otherwise it kills the holder just before
// its write. The harness restarts the worker under a new process number. It
// lands when the client died at the failpoint.
func KillClient(ctx context.Context, env *Env) (Landing, error) {
	var (
		c         Client
		failpoint string
		err       error
	)
	if len(env.Failpoints) > 0 {
		failpoint = env.Failpoints[0]
		c, err = parkAny(ctx, env, failpoint)
	} else {
		failpoint = workloads.FailpointBeforeWrite
		c, _, err = parkHolder(ctx, env, failpoint)
	}
	if err != nil || c == nil {
		return missed("no client reached failpoint %s within %s", failpoint, env.Patience), err
	}
	if err := kill(env, c, history.Value{Failpoint: failpoint}); err != nil {
		return Landing{}, err
	}
	return landed("%s was killed at failpoint %s", c.Name(), failpoint), nil
}

// parkAny arms failpoint in one random client and waits, up to
// env.Patience, until it is parked there; the failpoint is inside acquire,
// so it is reached at that client's next grant.
func parkAny(ctx context.Context, env *Env, failpoint string) (Client, error) {
	clients := env.Targets.Clients()
	if len(clients) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, env.Patience)
	defer cancel()
	c := clients[env.Rand.IntN(len(clients))]
	if parkRetrying(ctx, c, failpoint) == nil {
		return nil, nil
	}
	return c, nil
}
