package nemesis

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads"
)

// PauseHolder stops the client that holds the lock right after it checked
// that its lease is still valid and before it writes, for longer than the
// lease: the stop-the-world pause of the articles. No client-side check can
// catch a pause that lands there.
func PauseHolder(ctx context.Context, env *Env) error {
	c, leave, err := parkHolder(ctx, env, workloads.FailpointBeforeWrite)
	if err != nil || c == nil {
		return err
	}
	return pause(ctx, env, c, workloads.FailpointBeforeWrite, leave)
}

// PauseClient stops a random client wherever it is.
func PauseClient(ctx context.Context, env *Env) error {
	clients := env.Targets.Clients()
	if len(clients) == 0 {
		return nil
	}
	return pause(ctx, env, clients[env.Rand.IntN(len(clients))], "", nil)
}

// PauseNode stops a random node of the lock service.
func PauseNode(ctx context.Context, env *Env) error {
	nodes := env.Targets.Nodes()
	if len(nodes) == 0 {
		return nil
	}
	return pause(ctx, env, nodes[env.Rand.IntN(len(nodes))], "", nil)
}

// KillClient kills a client inside its critical section. Where the backend
// has a failpoint inside acquire (SETNX before EXPIRE), it aims there, so the
// lock is left without an expiry; otherwise it kills the holder just before
// its write. The harness restarts the worker under a new process number.
func KillClient(ctx context.Context, env *Env) error {
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
		return err
	}
	pid := c.PID()
	if err := c.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	env.Record(history.NemKill, history.Value{Target: c.Name(), PID: pid, Failpoint: failpoint})
	return nil
}

// pause stops t, lets it leave its failpoint (the word waits in its input
// until it runs again), and continues it after env.Pause.
func pause(ctx context.Context, env *Env, t Target, failpoint string, leave func()) error {
	pid := t.PID()
	if err := t.Signal(syscall.SIGSTOP); err != nil {
		if leave != nil {
			leave()
		}
		return err
	}
	env.Record(history.NemPause, history.Value{Target: t.Name(), PID: pid, DurationMs: env.Pause.Milliseconds(), Failpoint: failpoint})
	if leave != nil {
		leave()
	}
	timer := time.NewTimer(env.Pause)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
	err := t.Signal(syscall.SIGCONT)
	env.Record(history.NemResume, history.Value{Target: t.Name(), PID: pid})
	return err
}

// parkHolder waits for a holder and parks it at failpoint, trying the next
// holder when one leaves without reaching it, for up to env.Patience.
func parkHolder(ctx context.Context, env *Env, failpoint string) (Client, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, env.Patience)
	defer cancel()
	for ctx.Err() == nil {
		c, ok := env.Targets.Holder()
		if !ok {
			sleepCtx(ctx, 5*time.Millisecond)
			continue
		}
		leave, err := c.ParkAt(ctx, failpoint)
		if errors.Is(err, ErrMissed) {
			continue
		}
		if err != nil {
			return nil, nil, ignoreDeadline(err)
		}
		return c, leave, nil
	}
	return nil, nil, nil
}

// parkAny arms failpoint in one random client and waits until it is parked
// there; the failpoint is inside acquire, so it is reached at that client's
// next grant.
func parkAny(ctx context.Context, env *Env, failpoint string) (Client, error) {
	clients := env.Targets.Clients()
	if len(clients) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, env.Patience)
	defer cancel()
	c := clients[env.Rand.IntN(len(clients))]
	for {
		_, err := c.ParkAt(ctx, failpoint)
		switch {
		case err == nil:
			return c, nil
		case !errors.Is(err, ErrMissed):
			return nil, ignoreDeadline(err)
		}
	}
}

func ignoreDeadline(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
