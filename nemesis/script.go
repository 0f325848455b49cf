package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads"
)

// Action is one step of a scripted timeline, the exact schedule of an
// incident reproduction: at a time, or when a client reaches a moment, do
// one thing to one target.
type Action struct {
	// At is the earliest time since the workload started.
	At time.Duration
	// When, if set, waits after At for a client to reach a moment.
	When *Trigger
	// Do is the verb: pause, resume, kill, restart, clock, partition or
	// fault.
	Do     string
	Target string
	// For ends a pause, puts a clock back or heals a partition after this
	// long (0: until a resume, a clock step with no offset, or the end).
	For time.Duration
	// Offset is the wall clock offset a clock action sets.
	Offset time.Duration
	// Wipe makes a restart come back with no data.
	Wipe bool
	// Fault names a registered fault a fault action runs.
	Fault string
	// Links, for a partition, are the nodes and clients whose links to
	// Target it cuts, as a partition event of the history lists them.
	Links []string
}

// Needs is what the action needs of the running test beyond its target:
// a partition cuts single links.
func (a Action) Needs() []Capability {
	var out []Capability
	if a.Do == "partition" {
		out = append(out, CapLinks)
	}
	if a.When != nil && a.When.Reaches == MomentFailoverGrant {
		out = append(out, CapFailover)
	}
	return out
}

// Trigger is a moment of one client: "acquired" (it holds the lock),
// "bare-majority" (it holds the lock on a bare majority of the nodes, Node
// among them if set) or the name of a failpoint, where the client is held
// until the action is done.
type Trigger struct {
	Client  string
	Reaches string
	// Node, for bare-majority, is a node that must be among those that
	// granted.
	Node string
}

// Moments a trigger can wait for besides the failpoints: the client holds
// the lock (MomentAcquired); it holds it on a bare majority of the nodes,
// the race of Redlock's double grants, where one node that forgets (a
// clock jump, a restart with no data) lets another client win the others
// (MomentBareMajority); its release found nothing to delete, the lock it
// thought it held was gone or another's (MomentEmptyRelease).
//
// MomentFailoverGrant is a grant during a failover: the client holds the
// lock granted by the service no more than one lease after its latest
// failover (a switch-master the harness's watcher of the service recorded),
// asked for after it. The new master grants the lock then while a lease
// the old master granted before the switch may still stand, with its
// holder unaware: the race of Sentinel's lost locks.
const (
	MomentAcquired      = "acquired"
	MomentBareMajority  = "bare-majority"
	MomentEmptyRelease  = "empty-release"
	MomentFailoverGrant = "failover-grant"
)

// Failovers is a run's record of the service's failovers: when the latest
// switch-master was recorded, on the history's clock (0: none yet).
type Failovers interface {
	LastFailover() int64
}

// EmptyReleases is a client that says when its latest release that
// deleted nothing completed, on the history's clock (0: none yet).
type EmptyReleases interface {
	EmptyRelease() int64
}

// BareMajorityWait is how long a timeline leaves a step to meet a
// bare-majority moment: a grant on a bare majority is a race the clients
// win now and then (a few grants in a hundred, of any client on any
// majority); on Redlock with 5 clients and a 1s TTL a given client was
// granted on one including a given node about once every 5 s.
const BareMajorityWait = 15 * time.Second

// AnyClient, as a trigger's client, waits for the moment in whichever
// client reaches it first: clients are alike, and a race such as a grant on
// a bare majority comes several times as often to one of five clients as
// to a given one. Only bare-majority and failover-grant take it.
const AnyClient = "any"

// AnyClientMoments are the moments a trigger may wait for in any client.
var AnyClientMoments = []string{MomentBareMajority, MomentFailoverGrant}

// GrantNodes is a client of a multi-node lock that says which nodes granted
// its latest grant (backends.Grant.Nodes).
type GrantNodes interface {
	GrantNodes() []string
}

// BareMajority says whether nodes, those that granted a lock, are a bare
// majority of a service of n nodes (at least three: one node alone has no
// majority to split).
func BareMajority(nodes []string, n int) bool {
	return n >= 3 && len(nodes) == n/2+1
}

// Verbs of scripted actions.
var ScriptVerbs = []string{"pause", "resume", "kill", "restart", "clock", "partition", "fault"}

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
// healed by the harness at the end of the run. Each action is a step that
// ends with a landing event: it lands when it reached its target (a timed
// pause: and the target stayed stopped for it, or until the run ended).
// When the run ends first, it returns NotRun naming the steps left.
func RunScript(ctx context.Context, actions []Action, start time.Time, base Env) error {
	var pauses sync.WaitGroup
	defer pauses.Wait()
	for i, a := range actions {
		if !sleepUntil(ctx, start.Add(a.At)) {
			return notRunFrom(i, len(actions))
		}
		env := forStep(base, i+1, uint64(i)+1)
		name := a.Do
		if a.Do == "fault" {
			name = a.Fault
		}
		l, err := doAction(ctx, &env, a, &pauses)
		if l.Why == "" && l.Landed {
			continue // a timed pause records its landing when it ends
		}
		recordLanding(ctx, &env, name, l, err)
		if err != nil {
			if ctx.Err() != nil {
				return notRunFrom(i, len(actions))
			}
			return fmt.Errorf("step %d (%s %s): %w", i+1, a.Do, a.Target, err)
		}
	}
	return nil
}

func doAction(ctx context.Context, env *Env, a Action, pauses *sync.WaitGroup) (Landing, error) {
	var leave func()
	if a.When != nil {
		var err error
		if leave, err = await(ctx, env, *a.When); err != nil {
			if ctx.Err() != nil {
				return missed("the run ended before %s reached %s", a.When.Client, a.When.Reaches), nil
			}
			return Landing{}, err
		}
	}
	if a.Do == "fault" {
		if leave != nil {
			leave()
		}
		f, ok := registry[a.Fault]
		if !ok {
			return Landing{}, fmt.Errorf("unknown fault %q", a.Fault)
		}
		return f.Inject(ctx, env)
	}
	t, ok := env.Targets.Lookup(a.Target)
	if !ok {
		if leave != nil {
			leave()
		}
		return Landing{}, fmt.Errorf("no target %q in this run", a.Target)
	}
	at := ""
	if leave != nil && a.When.Client == a.Target && a.When.Reaches != MomentBareMajority {
		at = a.When.Reaches // the target is held at this failpoint
	}
	l, err := act(ctx, env, a, t, at, pauses)
	if leave != nil {
		leave() // after the fault: a stopped client reads it once continued
	}
	return l, err
}

// act does one action to t, held at failpoint at if that is set. A timed
// pause returns a landing with no reason: its goroutine records the
// landing once the pause is over.
func act(ctx context.Context, env *Env, a Action, t Target, at string, pauses *sync.WaitGroup) (Landing, error) {
	switch a.Do {
	case "pause":
		what := t.Name() + " was stopped"
		if at != "" {
			what += " at " + at
		}
		// A holder stopped at a failpoint is judged as pause-holder's is:
		// by the lease its lock reported, which the stop must outlive.
		c, isClient := t.(Client)
		holding, lease := at != "" && isClient && holds(env, c), leaseOf(env, t)
		pid, err := stop(env, t, history.Value{DurationMs: a.For.Milliseconds(), Failpoint: at})
		if err != nil {
			return Landing{}, err
		}
		if a.For <= 0 {
			return landed("%s until resumed", what), nil
		}
		return endAfter(ctx, env, a, pauses, func(held time.Duration) (Landing, error) {
			cont(env, t, pid) //nolint:errcheck // the harness continues everything at the end anyway
			l := heldFor(env, t, what, held, a.For)
			if !l.Landed && ctx.Err() != nil {
				// A script's pause is an exact timeline: stopped until the
				// run ended is as stopped as the run allowed.
				l = landed("%s %s, until the run ended (%s asked)", what, held.Round(time.Millisecond), a.For)
			}
			if l.Landed && holding && held < lease {
				l = missed("%s", leaseOutlived(t, lease, held))
			}
			return l, nil
		})
	case "resume":
		return landed("%s was continued", t.Name()), cont(env, t, t.PID())
	case "kill":
		// A client killed where its trigger held it: the failpoint is the
		// story (between SETNX and EXPIRE).
		var v history.Value
		if a.When != nil && a.When.Client == a.Target {
			v.Failpoint = a.When.Reaches
		}
		if at != "" {
			return landed("%s was killed at %s", t.Name(), at), kill(env, t, v)
		}
		return landed("%s was killed", t.Name()), kill(env, t, v)
	case "restart":
		r, ok := t.(Restarter)
		if !ok {
			return Landing{}, fmt.Errorf("%s cannot be restarted (only nodes can)", t.Name())
		}
		detail := Settings{Wipe: a.Wipe}.wipeDetail()
		env.Record(history.NemKill, history.Value{Target: t.Name(), PID: t.PID(), Detail: detail})
		if err := restart(ctx, env, r, a.Wipe, detail); err != nil {
			return Landing{}, err
		}
		return landed("%s was restarted (%s)", t.Name(), detail), nil
	case "clock":
		c, ok := t.(Clock)
		if !ok {
			return Landing{}, fmt.Errorf("%s has no clock lockcheck can move (only nodes started under libfaketime do)", t.Name())
		}
		if a.Offset == 0 {
			resetClock(ctx, env, c)
			return landed("%s's clock was put back", t.Name()), nil
		}
		if _, err := jumpClock(ctx, env, c, a.Offset); err != nil {
			return Landing{}, err
		}
		if a.For <= 0 {
			return landed("%s's clock jumped %s", t.Name(), signed(a.Offset)), nil
		}
		// A jump for a while is put back after it, however long the
		// step waited for its moment, while later steps go on.
		return endAfter(ctx, env, a, pauses, func(time.Duration) (Landing, error) {
			resetClock(ctx, env, c)
			return landed("%s's clock jumped %s for %s", t.Name(), signed(a.Offset), a.For), nil
		})
	case "partition":
		return cutLinks(ctx, env, a, t, pauses)
	}
	return Landing{}, fmt.Errorf("unknown action %q", a.Do)
}

// cutLinks cuts the links between t and each of a.Links, the way the
// partition faults cut theirs (split), and heals them after a.For while
// later steps go on; the landing is recorded once the cut is healed.
func cutLinks(ctx context.Context, env *Env, a Action, t Target, pauses *sync.WaitGroup) (Landing, error) {
	if env.Network == nil {
		return Landing{}, ErrNoPartition
	}
	if a.For <= 0 {
		return Landing{}, errors.New("a partition step needs a duration (for) after which it heals")
	}
	s := split{side: []Target{t}}
	for _, name := range a.Links {
		l, ok := env.Targets.Lookup(name)
		if !ok {
			return Landing{}, fmt.Errorf("no target %q in this run to cut %s from", name, t.Name())
		}
		s.rest = append(s.rest, l)
	}
	cutEnv := *env
	cutEnv.Pause = a.For // what the partition events say it asks
	heal, err := s.cut(&cutEnv)
	if err != nil {
		return Landing{}, err
	}
	return endAfter(ctx, env, a, pauses, func(held time.Duration) (Landing, error) {
		herr := heal()
		what := fmt.Sprintf("%s was cut from %s", t.Name(), strings.Join(a.Links, ", "))
		l := landed("%s for %s", what, held.Round(time.Millisecond))
		if held+5*time.Millisecond < a.For {
			var ok bool
			if l, ok = cutShort(env, what, held, a.For); !ok {
				l = missed("%s %s of the %s asked: the run ended first", what, held.Round(time.Millisecond), a.For)
			}
		}
		return l, herr
	})
}

// endAfter ends action a after its For (or when the run ends) while later
// steps go on: end undoes it, given how long it held, and says its
// landing, which is recorded then.
func endAfter(ctx context.Context, env *Env, a Action, pauses *sync.WaitGroup, end func(held time.Duration) (Landing, error)) (Landing, error) {
	pauses.Add(1)
	go func() {
		defer pauses.Done()
		start := time.Now()
		sleepCtx(ctx, a.For)
		l, err := end(time.Since(start))
		recordLanding(ctx, env, a.Do, l, err)
	}()
	return Landing{Landed: true}, nil
}

// await waits until the trigger's client reaches its moment. At a
// failpoint the client is held there; the returned leave lets it go on.
func await(ctx context.Context, env *Env, tr Trigger) (func(), error) {
	switch {
	case tr.Client == AnyClient && tr.Reaches == MomentBareMajority:
		return awaitBareMajority(ctx, env, nil, tr.Node)
	case tr.Client == AnyClient && tr.Reaches == MomentFailoverGrant:
		return nil, awaitFailoverGrant(ctx, env, nil)
	}
	t, ok := env.Targets.Lookup(tr.Client)
	if !ok {
		return nil, fmt.Errorf("no client %q in this run", tr.Client)
	}
	c, ok := t.(Client)
	if !ok {
		return nil, fmt.Errorf("%s is not a client", tr.Client)
	}
	switch tr.Reaches {
	case MomentAcquired:
		return nil, pollUntil(ctx, func() bool { return holds(env, c) })
	case MomentBareMajority:
		if _, ok := t.(GrantNodes); !ok {
			return nil, fmt.Errorf("%s cannot say which nodes granted its lock", tr.Client)
		}
		return awaitBareMajority(ctx, env, c, tr.Node)
	case MomentFailoverGrant:
		return nil, awaitFailoverGrant(ctx, env, c)
	case MomentEmptyRelease:
		r, ok := t.(EmptyReleases)
		if !ok {
			return nil, fmt.Errorf("%s cannot say whether its releases deleted anything", tr.Client)
		}
		since := history.Now()
		return nil, pollUntil(ctx, func() bool { return r.EmptyRelease() > since })
	}
	for {
		leave, err := c.ParkAt(ctx, tr.Reaches)
		if errors.Is(err, ErrMissed) {
			continue
		}
		return leave, err
	}
}

// awaitFailoverGrant waits for client c (any client when nil) to hold a
// lock granted during a failover (MomentFailoverGrant). It does not hold
// the client: the step acts on the service or another client while the
// grant stands.
func awaitFailoverGrant(ctx context.Context, env *Env, c Client) error {
	f, ok := env.Targets.(Failovers)
	if !ok {
		return errors.New("this run records no failovers of its service")
	}
	return pollUntil(ctx, func() bool {
		candidates := []Client{c}
		if c == nil {
			candidates = env.Targets.Clients()
		}
		return slices.ContainsFunc(candidates, func(cand Client) bool {
			return grantedInFailover(env, cand, f.LastFailover())
		})
	})
}

// grantedInFailover says whether client c holds a lock right now that it
// asked for after the failover at switched and was granted within a lease
// of it.
func grantedInFailover(env *Env, c Client, switched int64) bool {
	gt, ok := c.(GrantTimes)
	if !ok || switched == 0 {
		return false
	}
	invoke, granted := gt.Grant()
	return invoke >= switched && granted-switched <= int64(leaseOf(env, c)) && holds(env, c)
}

// pollUntil checks cond every 2ms (a client holds the lock for its think
// time, 20ms by default) until it holds or ctx ends.
func pollUntil(ctx context.Context, cond func() bool) error {
	for !cond() {
		if !sleepWhile(ctx, 2*time.Millisecond) {
			return ctx.Err()
		}
	}
	return nil
}

// awaitBareMajority waits for client c (any client when nil) to hold the
// lock on a bare majority with node among them, and holds it there, at its
// lease check (before-lease-check: slow, not stopped), so that the step
// acts while the lease it won stands: the harness learns of a grant
// milliseconds after it, and a client's critical section is 20ms. The
// returned leave lets the client go once another client holds the lock
// too, or the client's lease is about to end, whichever is first (as
// clock-pause holds its client): the race the step opens is the one the
// run met, not one this machine's speed decides. A client that released
// before it was held (ErrMissed) is waited for again.
func awaitBareMajority(ctx context.Context, env *Env, c Client, node string) (func(), error) {
	n := len(env.Targets.Nodes())
	for {
		var found Client
		err := pollUntil(ctx, func() bool {
			candidates := []Client{c}
			if c == nil {
				candidates = env.Targets.Clients()
			}
			for _, cand := range candidates {
				if onBareMajority(env, cand, n, node) {
					found = cand
					return true
				}
			}
			return false
		})
		if err != nil {
			return nil, err
		}
		leave, err := found.ParkAt(ctx, workloads.FailpointBeforeLeaseCheck)
		if errors.Is(err, ErrMissed) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return func() {
			waitOtherHolder(ctx, env, found, leaseLeft(env, found))
			leave()
		}, nil
	}
}

// leaseLeft is how long c's latest grant has left, less the checker's
// clock allowance: from its invoke, as the checker counts it; half the TTL
// when c cannot say when it asked.
func leaseLeft(env *Env, c Client) time.Duration {
	if gt, ok := c.(GrantTimes); ok {
		if invoke, _ := gt.Grant(); invoke > 0 {
			lease := leaseOf(env, c)
			ends, _ := history.LeaseEnds(invoke, invoke, lease, history.ClockAllowance(lease))
			return time.Duration(ends - history.Now())
		}
	}
	return leaseOf(env, c) / 2
}

// onBareMajority says whether client c holds a lock right now granted by a
// bare majority of the service's n nodes, node among them if set.
func onBareMajority(env *Env, c Client, n int, node string) bool {
	g, ok := c.(GrantNodes)
	if !ok {
		return false
	}
	nodes := g.GrantNodes()
	return holds(env, c) && BareMajority(nodes, n) && (node == "" || slices.Contains(nodes, node))
}

// holds says whether client c holds a lock right now.
func holds(env *Env, c Client) bool {
	if l, ok := env.Targets.(HolderLister); ok {
		return slices.ContainsFunc(l.Holders(), func(h Client) bool { return h.Name() == c.Name() })
	}
	h, ok := env.Targets.Holder()
	return ok && h.Name() == c.Name()
}

func sleepWhile(ctx context.Context, d time.Duration) bool {
	sleepCtx(ctx, d)
	return ctx.Err() == nil
}
