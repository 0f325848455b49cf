package nemesis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads"
)

func init() {
	register(Fault{Name: "failover-kill", Inject: FailoverKill, Needs: []Capability{CapFailover, CapRestart},
		Help: "SIGKILL the master, let the sentinels promote a replica, restart the old master, which rejoins as a replica"})
	register(Fault{Name: "failover-pause", Inject: FailoverPause, Needs: []Capability{CapFailover},
		Help: "SIGSTOP the master until a replica is promoted, then SIGCONT it: for a while there are two masters"})
	register(Fault{Name: "failover-lost-lock", Inject: FailoverLostLock, Needs: []Capability{CapFailover},
		Help: "cut the replicas off, let one client take the lock on the master alone, stop the master and fail over: the promoted replica never saw the grant. Needs a TTL well above the 2-3 s switch, e.g. --ttl 10s"})
}

// FailoverService is what the failover faults need of a lock service with
// automatic failover (Redis Sentinel); its Targets.Service handle offers it.
// Nodes are named as the targets are.
type FailoverService interface {
	// WaitSettled waits until the service is whole (no failover in
	// progress anywhere, every replica in sync) and names its master.
	WaitSettled(ctx context.Context) (string, error)
	// Replicas names the data nodes other than master.
	Replicas(master string) []string
	// WaitReplicated waits until every replica has applied all of master's
	// writes.
	WaitReplicated(ctx context.Context, master string) error
	// CutReplicas closes master's connections to its replicas, so that
	// what it writes from now on reaches none of them; it says how, for
	// the history.
	CutReplicas(ctx context.Context, master string) (how string, err error)
	// AwaitSwitch starts listening for a promotion away from `from`; wait
	// blocks until one comes and names the promoted node, or gives up
	// after the longest a failover can take. Listening ends when wait
	// returns or ctx ends.
	AwaitSwitch(ctx context.Context, from string) (wait func() (string, error), err error)
	// WaitAgreed waits until the whole service, and so every client that
	// asks it, names master.
	WaitAgreed(ctx context.Context, master string) error
	// WaitReplicaOf waits until node is a connected replica of master.
	WaitReplicaOf(ctx context.Context, node, master string) error
}

// RefusalCounter is offered by Targets that count the acquires the service
// refused to write at all (NOREPLICAS under min-replicas-to-write).
type RefusalCounter interface {
	Refusals() int64
}

// refusals is how many acquires the service refused so far, or -1 when the
// targets cannot tell.
func refusals(env *Env) int64 {
	if rc, ok := env.Targets.(RefusalCounter); ok {
		return rc.Refusals()
	}
	return -1
}

// ErrNoFailover means the backend has no automatic failover to exercise.
var ErrNoFailover = errors.New("the lock service has no automatic failover (the failover faults need --backend sentinel)")

// Bounds of the failover faults' waits.
const (
	// rejoinWait bounds the wait for an old master to rejoin as a
	// replica; the sentinels convert it about ten seconds after it is back.
	rejoinWait = 30 * time.Second
	// quiesceWait bounds parking every client before its next acquire and
	// the replicas catching up; a client stuck in an operation takes up to
	// its operation timeout.
	quiesceWait = 5 * time.Second
	// grantWait bounds the wait for a client to be granted the lock and
	// reach its write. A master that refuses writes (NOREPLICAS under
	// min-replicas-to-write) grants nothing, and the recipe goes on without
	// a holder.
	grantWait = 3 * time.Second
)

// FailoverKill kills the master, waits for the sentinels to promote a
// replica and for every sentinel to name it, restarts the old master
// (empty: the nodes keep no data on disk) and waits for it to rejoin as a
// replica of the new one. Restarted sooner, the empty old master would take
// writes from clients whose sentinel still names it. It lands when a
// replica was promoted.
func FailoverKill(ctx context.Context, env *Env) (Landing, error) {
	svc, master, err := failoverMaster(ctx, env)
	if err != nil || master == nil {
		return missed("the service did not settle within %s", rejoinWait), err
	}
	old, ok := master.(Restarter)
	if !ok {
		return Landing{}, fmt.Errorf("master %s cannot be restarted", master.Name())
	}
	swCtx, stopListening := context.WithCancel(ctx)
	defer stopListening()
	wait, err := svc.AwaitSwitch(swCtx, old.Name())
	if err != nil {
		return Landing{}, err
	}
	if err := kill(env, old, history.Value{Detail: "master"}); err != nil {
		return Landing{}, err
	}
	promoted, switchErr := wait()
	if switchErr == nil {
		actx, cancel := context.WithTimeout(ctx, rejoinWait)
		svc.WaitAgreed(actx, promoted) //nolint:errcheck // the old master comes back either way
		cancel()
	}
	// Even when the run is ending the node must come back: teardown and the
	// end-of-run inspection expect every node up.
	if err := restart(ctx, env, old, false, "data lost"); err != nil {
		return Landing{}, err
	}
	if switchErr != nil {
		return missed("no replica was promoted after %s was killed: %v", old.Name(), switchErr), ignoreDeadline(switchErr)
	}
	awaitRejoin(ctx, svc, old.Name(), promoted)
	return landed("%s was promoted after master %s was killed", promoted, old.Name()), nil
}

// FailoverPause stops the master until the sentinels have promoted a
// replica, then continues it. Until the sentinels turn it into a replica
// the old master still takes writes from whoever reaches it. It lands when
// a replica was promoted while the master was stopped.
func FailoverPause(ctx context.Context, env *Env) (Landing, error) {
	svc, master, err := failoverMaster(ctx, env)
	if err != nil || master == nil {
		return missed("the service did not settle within %s", rejoinWait), err
	}
	swCtx, stopListening := context.WithCancel(ctx)
	defer stopListening()
	wait, err := svc.AwaitSwitch(swCtx, master.Name())
	if err != nil {
		return Landing{}, err
	}
	pid, err := stop(env, master, history.Value{Detail: "until a replica is promoted"})
	if err != nil {
		return Landing{}, err
	}
	promoted, switchErr := wait()
	if err := cont(env, master, pid); err != nil {
		return Landing{}, err
	}
	if switchErr != nil {
		return missed("no replica was promoted while %s was stopped: %v", master.Name(), switchErr), ignoreDeadline(switchErr)
	}
	awaitRejoin(ctx, svc, master.Name(), promoted)
	return landed("%s was promoted while master %s was stopped", promoted, master.Name()), nil
}

// FailoverLostLock is the deterministic lost lock of DESIGN.md's field
// notes, aimed at the moment a client has just acquired:
//
//  1. every client is held before its next acquire, so the lock is free,
//     and the replicas catch up with the master;
//  2. both replicas are stopped and the master's links to them closed (a
//     stopped replica alone is not enough: the write would wait in the
//     socket buffer and arrive when it continues);
//  3. one client, A, is let go: the master alone grants it the lock and its
//     INCR fence, and A is held just before its write;
//  4. the master is stopped and the replicas continued; the sentinels
//     promote one that never saw A's grant;
//  5. once every sentinel, and so every client, knows the new master, the
//     other clients are let go; the first granted the lock by the new
//     master, B, is held before its write too: A and B both hold it, with
//     the same fence;
//  6. A and B write; the old master is continued, to rejoin as a replica,
//     once any command a client still sent it has timed out. Continued
//     earlier, it would grant the lock to clients that still think it is
//     master, which is failover-pause's story, not this one.
//
// With min-replicas-to-write the master refuses A's SET (NOREPLICAS) and
// the recipe goes on without a holder: nothing is granted twice. It lands
// when A and B were both granted the lock.
func FailoverLostLock(ctx context.Context, env *Env) (Landing, error) {
	svc, master, err := failoverMaster(ctx, env)
	if err != nil || master == nil {
		return missed("the service did not settle within %s", rejoinWait), err
	}
	var replicas []Target
	for _, name := range svc.Replicas(master.Name()) {
		r := findNode(env, name)
		if r == nil {
			return Landing{}, fmt.Errorf("the service names %s, which is none of its nodes", name)
		}
		replicas = append(replicas, r)
	}
	clients := env.Targets.Clients()
	if len(clients) < 2 {
		return missed("%d client(s) cannot hold the lock twice", len(clients)), nil
	}
	h := &healer{env: env}
	defer h.heal()

	// 1. Quiesce.
	qctx, cancel := context.WithTimeout(ctx, quiesceWait)
	leaves := parkEach(qctx, clients, workloads.FailpointBeforeAcquire)
	cancel()
	for _, leave := range leaves {
		if leave != nil {
			h.onHeal(leave)
		}
	}
	for i, leave := range leaves {
		if leave == nil {
			return missed("%s could not be held before its next acquire within %s (stuck in an operation)", clients[i].Name(), quiesceWait), nil
		}
	}
	rctx, cancel := context.WithTimeout(ctx, quiesceWait)
	err = svc.WaitReplicated(rctx, master.Name())
	cancel()
	if err != nil {
		return missed("the replicas did not catch up with %s within %s (an old master still rejoining)", master.Name(), quiesceWait), nil
	}
	swCtx, stopListening := context.WithCancel(ctx)
	defer stopListening()
	wait, err := svc.AwaitSwitch(swCtx, master.Name())
	if err != nil {
		return Landing{}, err
	}

	// 2. Cut the replicas off.
	for _, r := range replicas {
		if err := h.stop(r, history.Value{Detail: "cut off from " + master.Name()}); err != nil {
			return Landing{}, err
		}
	}
	how, err := svc.CutReplicas(ctx, master.Name())
	if err != nil {
		return Landing{}, err
	}
	env.Record(history.NemCutReplicas, history.Value{Target: master.Name(), Detail: how})

	// 3. A takes the lock on the master alone.
	refusedBefore := refusals(env)
	ai := env.Rand.IntN(len(clients))
	a, leaveA := parkFirst(ctx, clients[ai:ai+1], workloads.FailpointBeforeWrite, leaves[ai:ai+1], grantWait)
	if a != nil {
		h.onHeal(leaveA)
		env.Record(history.NemFailpoint, history.Value{Target: a.Name(), Failpoint: workloads.FailpointBeforeWrite,
			Detail: "granted the lock by " + master.Name() + " alone"})
	}

	refused := refusedBefore >= 0 && refusals(env) > refusedBefore

	// 4. Fail over to a replica that never saw the grant.
	if err := h.stop(master, history.Value{Detail: "until a replica is promoted"}); err != nil {
		return Landing{}, err
	}
	for _, r := range replicas {
		if err := h.cont(r); err != nil {
			return Landing{}, err
		}
	}
	promoted, err := wait()
	if err != nil {
		return missed("no replica was promoted while %s was stopped: %v", master.Name(), err), ignoreDeadline(err)
	}

	// 5. B takes the lock on the new master while A holds it.
	actx, cancel := context.WithTimeout(ctx, rejoinWait)
	svc.WaitAgreed(actx, promoted) //nolint:errcheck // the clients are let go either way
	cancel()
	othersLeft := time.Now()
	others := append(append([]Client(nil), clients[:ai]...), clients[ai+1:]...)
	otherLeaves := append(append([]func(){}, leaves[:ai]...), leaves[ai+1:]...)
	b, leaveB := parkFirst(ctx, others, workloads.FailpointBeforeWrite, otherLeaves, grantWait)
	if b != nil {
		detail := "granted the lock by " + promoted
		if a != nil {
			detail += " while " + a.Name() + " holds it"
		}
		env.Record(history.NemFailpoint, history.Value{Target: b.Name(), Failpoint: workloads.FailpointBeforeWrite, Detail: detail})
	}

	// 6. Both write; the old master comes back.
	if leaveA != nil {
		leaveA()
	}
	if leaveB != nil {
		leaveB()
	}
	sleepCtx(ctx, time.Until(othersLeft.Add(env.OpTimeout)))
	if err := h.cont(master); err != nil {
		return Landing{}, err
	}
	awaitRejoin(ctx, svc, master.Name(), promoted)
	switch {
	case a == nil && refused:
		return landed("%s alone refused to write (min-replicas-to-write): nothing was granted to lose, and %s was promoted", master.Name(), promoted), nil
	case a == nil:
		return missed("no client was granted the lock by %s alone within %s (a master that refuses writes without its replicas grants nothing)", master.Name(), grantWait), nil
	case b == nil:
		return missed("no client was granted the lock by the promoted %s within %s while %s held it", promoted, grantWait, a.Name()), nil
	}
	return landed("%s (by %s alone) and %s (by the promoted %s) were both granted the lock", a.Name(), master.Name(), b.Name(), promoted), nil
}

// failoverMaster finds the service's failover handle and, once the service
// is whole, the master's target: a failover started while the last one is
// still ending can leave a sentinel stuck in it. A nil target with no error
// means the service did not settle within rejoinWait: the next step tries
// again.
func failoverMaster(ctx context.Context, env *Env) (FailoverService, Target, error) {
	svc, ok := env.Targets.Service().(FailoverService)
	if !ok {
		return nil, nil, ErrNoFailover
	}
	settleCtx, cancel := context.WithTimeout(ctx, rejoinWait)
	name, err := svc.WaitSettled(settleCtx)
	cancel()
	if err != nil {
		return nil, nil, nil
	}
	t := findNode(env, name)
	if t == nil {
		return nil, nil, fmt.Errorf("the service names %s as master, which is none of its nodes", name)
	}
	return svc, t, nil
}

// awaitRejoin waits, within rejoinWait, for an old master to rejoin as a
// replica of the promoted node, so that the next fault finds the service
// whole. A slow rejoin is the service's business, not the fault's failure:
// the watcher records the role whenever it changes.
func awaitRejoin(ctx context.Context, svc FailoverService, old, promoted string) {
	rctx, cancel := context.WithTimeout(ctx, rejoinWait)
	defer cancel()
	svc.WaitReplicaOf(rctx, old, promoted) //nolint:errcheck // see above
}
