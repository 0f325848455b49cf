package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"github.com/lockcheck/lockcheck/history"
)

// Action is one step of a scripted timeline, the exact schedule of an
// incident reproduction: at a time, or when a client reaches a moment, do
// one thing to one target.
type Action struct {
	// At is the earliest time since the workload started.
	At time.Duration
	// When, if set, waits after At for a client to reach a moment.
	When *Trigger
	// Do is the verb: pause, resume, kill, restart, clock or fault.
	Do     string
	Target string
	// For ends a pause after this long (0: until a resume or the end).
	For time.Duration
	// Offset is the wall clock offset a clock action sets.
	Offset time.Duration
	// Wipe makes a restart come back with no data.
	Wipe bool
	// Fault names a registered fault a fault action runs.
	Fault string
}

// Trigger is a moment of one client: "acquired" (it holds the lock) or the
// name of a failpoint, where the client is held until the action is done.
type Trigger struct {
	Client  string
	Reaches string
}

// MomentAcquired is the trigger moment "the client holds the lock".
const MomentAcquired = "acquired"

// Verbs of scripted actions.
var ScriptVerbs = []string{"pause", "resume", "kill", "restart", "clock", "fault"}

// NotRun is RunScript's error when the run ended before every step was
// done: Steps are the indices of the steps that never ran (or were still
// waiting for their moment), so a scenario can say its timeline did not
// happen as written.
type NotRun struct{ Steps []int }

func (e *NotRun) Error() string {
	return fmt.Sprintf("%d of the timeline's steps never ran: the run ended first", len(e.Steps))
}

// notRunFrom is NotRun for step i and every step after it.
func notRunFrom(i, n int) error {
	e := &NotRun{}
	for ; i < n; i++ {
		e.Steps = append(e.Steps, i)
	}
	return e
}

// RunScript performs actions in order. A pause with a duration ends on its
// own while later actions go on; everything a script leaves faulted is
// healed by the harness at the end of the run. When the run ends first,
// it returns NotRun naming the steps left.
func RunScript(ctx context.Context, actions []Action, start time.Time, base Env) error {
	var pauses sync.WaitGroup
	defer pauses.Wait()
	for i, a := range actions {
		if !sleepUntil(ctx, start.Add(a.At)) {
			return notRunFrom(i, len(actions))
		}
		env := base
		env.Rand = rand.New(rand.NewPCG(uint64(i)+1, 0))
		if err := doAction(ctx, &env, a, &pauses); err != nil {
			if ctx.Err() != nil {
				return notRunFrom(i, len(actions))
			}
			return fmt.Errorf("step %d (%s %s): %w", i+1, a.Do, a.Target, err)
		}
	}
	return nil
}

func doAction(ctx context.Context, env *Env, a Action, pauses *sync.WaitGroup) error {
	var leave func()
	if a.When != nil {
		var err error
		if leave, err = await(ctx, env, *a.When); err != nil {
			return err
		}
	}
	if a.Do == "fault" {
		if leave != nil {
			leave()
		}
		f, ok := Faults[a.Fault]
		if !ok {
			return fmt.Errorf("unknown fault %q", a.Fault)
		}
		return f(ctx, env)
	}
	t, ok := env.Targets.Lookup(a.Target)
	if !ok {
		if leave != nil {
			leave()
		}
		return fmt.Errorf("no target %q in this run", a.Target)
	}
	err := act(ctx, env, a, t, pauses)
	if leave != nil {
		leave() // after the fault: a stopped client reads it once continued
	}
	return err
}

func act(ctx context.Context, env *Env, a Action, t Target, pauses *sync.WaitGroup) error {
	pid := t.PID()
	switch a.Do {
	case "pause":
		if err := t.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		env.Record(history.NemPause, history.Value{Target: t.Name(), PID: pid, DurationMs: a.For.Milliseconds()})
		if a.For > 0 {
			pauses.Add(1)
			go func() {
				defer pauses.Done()
				sleepCtx(ctx, a.For)
				t.Signal(syscall.SIGCONT) //nolint:errcheck // the harness continues everything at the end anyway
				env.Record(history.NemResume, history.Value{Target: t.Name(), PID: pid})
			}()
		}
		return nil
	case "resume":
		err := t.Signal(syscall.SIGCONT)
		env.Record(history.NemResume, history.Value{Target: t.Name(), PID: pid})
		return err
	case "kill":
		if err := t.Signal(syscall.SIGKILL); err != nil {
			return err
		}
		env.Record(history.NemKill, history.Value{Target: t.Name(), PID: pid})
		return nil
	case "restart":
		r, ok := t.(Restarter)
		if !ok {
			return fmt.Errorf("%s cannot be restarted (only nodes can)", t.Name())
		}
		detail := "data kept"
		if a.Wipe {
			detail = "data wiped"
		}
		env.Record(history.NemKill, history.Value{Target: t.Name(), PID: pid, Detail: detail})
		if err := r.Restart(context.WithoutCancel(ctx), a.Wipe); err != nil {
			return err
		}
		env.Record(history.NemStart, history.Value{Target: t.Name(), PID: r.PID(), Detail: detail})
		return nil
	case "clock":
		c, ok := t.(Clock)
		if !ok {
			return fmt.Errorf("%s has no clock lockcheck can move (only nodes started under libfaketime do)", t.Name())
		}
		if a.Offset == 0 {
			resetClock(ctx, env, c)
			return nil
		}
		return jumpClock(ctx, env, c, a.Offset)
	}
	return fmt.Errorf("unknown action %q", a.Do)
}

// await waits until the trigger's client reaches its moment. At a
// failpoint the client is held there; the returned leave lets it go on.
func await(ctx context.Context, env *Env, tr Trigger) (func(), error) {
	t, ok := env.Targets.Lookup(tr.Client)
	if !ok {
		return nil, fmt.Errorf("no client %q in this run", tr.Client)
	}
	c, ok := t.(Client)
	if !ok {
		return nil, fmt.Errorf("%s is not a client", tr.Client)
	}
	if tr.Reaches == MomentAcquired {
		for {
			if h, ok := env.Targets.Holder(); ok && h.Name() == c.Name() {
				return nil, nil
			}
			if !sleepWhile(ctx, 2*time.Millisecond) {
				return nil, ctx.Err()
			}
		}
	}
	for {
		leave, err := c.ParkAt(ctx, tr.Reaches)
		if errors.Is(err, ErrMissed) {
			continue
		}
		return leave, err
	}
}

func sleepWhile(ctx context.Context, d time.Duration) bool {
	sleepCtx(ctx, d)
	return ctx.Err() == nil
}
