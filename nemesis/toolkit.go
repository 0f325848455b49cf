package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/lockcheck/lockcheck/history"
)

// The toolkit faults compose: signal a target and record it, in one place.

// stop SIGSTOPs t and records the pause; v adds what the event says besides
// the target and its process id, which stop fills in. It returns that id,
// for the resume.
func stop(env *Env, t Target, v history.Value) (int, error) {
	pid := t.PID()
	if err := t.Signal(syscall.SIGSTOP); err != nil {
		return pid, err
	}
	v.Target, v.PID = t.Name(), pid
	env.Record(history.NemPause, v)
	return pid, nil
}

// cont SIGCONTs t, stopped as process pid, and records the resume.
func cont(env *Env, t Target, pid int) error {
	err := t.Signal(syscall.SIGCONT)
	env.Record(history.NemResume, history.Value{Target: t.Name(), PID: pid})
	return err
}

// kill SIGKILLs t and records it, with v as for stop.
func kill(env *Env, t Target, v history.Value) error {
	pid := t.PID()
	if err := t.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	v.Target, v.PID = t.Name(), pid
	env.Record(history.NemKill, v)
	return nil
}

// restart starts r again and records it. It runs even when the run is
// ending: teardown and the end-of-run inspection expect every node up.
func restart(ctx context.Context, env *Env, r Restarter, wipe bool, detail string) error {
	if err := r.Restart(context.WithoutCancel(ctx), wipe); err != nil {
		env.Record(history.NemStart, history.Value{Target: r.Name(), Detail: "restart failed: " + err.Error()})
		return err
	}
	env.Record(history.NemStart, history.Value{Target: r.Name(), PID: r.PID(), Detail: detail})
	return nil
}

// stopFor stops t for d, or until ctx ends, and continues it. leave, if
// set, lets a client held at a failpoint go on once it is stopped: it reads
// the word when it runs again. It returns how long t was stopped.
func stopFor(ctx context.Context, env *Env, t Target, d time.Duration, v history.Value, leave func()) (time.Duration, error) {
	v.DurationMs = d.Milliseconds()
	pid, err := stop(env, t, v)
	if leave != nil {
		leave()
	}
	if err != nil {
		return 0, err
	}
	stopped := time.Now()
	sleepCtx(ctx, d)
	held := time.Since(stopped)
	return held, cont(env, t, pid)
}

// heldFor says whether a stop of held lasted the asked d (a few
// milliseconds of timer slack aside), and if not, why. what says what
// was stopped ("c0 was stopped", "c0 was stopped at before-renew").
func heldFor(env *Env, t Target, what string, held, d time.Duration) Landing {
	if held+5*time.Millisecond < d {
		if l, ok := cutShortWithin(leaseOf(env, t), what, held, d); ok {
			return l
		}
		return missed("%s %s of the %s asked: the run ended first", what, held.Round(time.Millisecond), d)
	}
	return landed("%s for %s", what, held.Round(time.Millisecond))
}

// cutShort is the landing of a fault that lasts, which the end of the run
// cut short after held of the asked d, once it had created its moment: a
// fault in force for a lease (env.Lease) had what it takes to change what the
// lock does (a lease runs out under it), and the run ending later takes
// nothing back. what says what the fault did ("redis-0 was cut off"). ok
// is false when it had not lasted that long: it missed, the caller says
// how.
func cutShort(env *Env, what string, held, d time.Duration) (Landing, bool) {
	return cutShortWithin(env.Lease, what, held, d)
}

// cutShortWithin is cutShort for a fault whose moment is a lease of its
// own: a client's, as its lock reported it (leaseOf).
func cutShortWithin(lease time.Duration, what string, held, d time.Duration) (Landing, bool) {
	if held < lease {
		return Landing{}, false
	}
	return landed("%s, %s", what, cutShortBy(held, d)), true
}

// cutShortBy says that the end of the run cut a fault short.
func cutShortBy(held, d time.Duration) string {
	return fmt.Sprintf("cut short by the end of the run after %s of %s", held.Round(time.Millisecond), d)
}

// healer undoes what a fault did so far, whichever way it ends: stopped
// targets are continued and held clients let go.
type healer struct {
	env     *Env
	stopped map[Target]int // target -> the pid it was stopped as
	order   []Target
	undo    []func()
}

// stop stops t, to be continued by cont or heal.
func (h *healer) stop(t Target, v history.Value) error {
	pid, err := stop(h.env, t, v)
	if err != nil {
		return err
	}
	if h.stopped == nil {
		h.stopped = map[Target]int{}
	}
	h.stopped[t] = pid
	h.order = append(h.order, t)
	return nil
}

// cont continues a target stopped by stop.
func (h *healer) cont(t Target) error {
	pid, ok := h.stopped[t]
	if !ok {
		return nil
	}
	delete(h.stopped, t)
	return cont(h.env, t, pid)
}

// onHeal adds an undo step; steps must be safe to run twice.
func (h *healer) onHeal(f func()) { h.undo = append(h.undo, f) }

func (h *healer) heal() {
	for _, t := range h.order {
		h.cont(t) //nolint:errcheck // best effort; teardown continues every process anyway
	}
	for _, f := range h.undo {
		f()
	}
}

// The park family holds clients at failpoints.

// parkHolder waits for a holder and parks it at failpoint, trying the next
// holder when one leaves without reaching it, for up to env.Patience. A nil
// client with no error means none came.
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
			return c, sync.OnceFunc(leave), nil
		}
		sleepCtx(ctx, time.Millisecond)
	}
	return nil, nil, nil
}

// parkRetrying holds c at failpoint, arming it again each time c leaves its
// hold without reaching it, until ctx ends; nil when it never got there.
func parkRetrying(ctx context.Context, c Client, failpoint string) func() {
	for {
		leave, err := c.ParkAt(ctx, failpoint)
		switch {
		case err == nil:
			return leave
		case !errors.Is(err, ErrMissed):
			return nil
		}
		// A client that exited misses at once; do not spin on it.
		sleepCtx(ctx, 5*time.Millisecond)
	}
}

// parkEach holds every client at failpoint, in parallel, until ctx ends.
// The result has each client's leave, or nil for one that was not held.
// Every leave is safe to call twice.
func parkEach(ctx context.Context, clients []Client, failpoint string) []func() {
	leaves := make([]func(), len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if leave := parkRetrying(ctx, c, failpoint); leave != nil {
				leaves[i] = sync.OnceFunc(leave)
			}
		}()
	}
	wg.Wait()
	return leaves
}

// parkFirst arms failpoint in every candidate, lets them go on from where
// they are held (start, one leave per candidate), and returns the first to
// be held at failpoint, within wait, with its leave (safe to call twice).
// The others are disarmed, and let go if they were held meanwhile. A
// candidate let go before its arming reached it passes the failpoint once
// and is held on its next round.
func parkFirst(ctx context.Context, candidates []Client, failpoint string, start []func(), wait time.Duration) (Client, func()) {
	type held struct {
		c     Client
		leave func()
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	found := make(chan held, len(candidates))
	var wg sync.WaitGroup
	for _, c := range candidates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if leave := parkRetrying(ctx, c, failpoint); leave != nil {
				found <- held{c, sync.OnceFunc(leave)}
			}
		}()
	}
	for _, leave := range start {
		leave()
	}
	var first held
	select {
	case first = <-found:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	close(found)
	for extra := range found {
		extra.leave()
	}
	return first.c, first.leave
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
