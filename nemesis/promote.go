package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads"
)

func init() {
	register(Fault{Name: "failover-promote", Inject: FailoverPromote, Needs: []Capability{CapPromote, CapRestart},
		Help: "while a client holds the lock right before its write, SIGKILL the primary and promote its streaming standby (pg_promote), as an operator or a failover manager does; the clients reconnect to it, which has none of the advisory locks, and the holder carries on. The old primary then rejoins as a standby, wiped (PostgreSQL; starts the standby whatever --replicas says)"})
}

// Promoter is a service whose primary has a streaming standby that only
// the nemesis promotes (PostgreSQL, which never fails over by itself): the
// backend's handle (Targets.Service) offers it when the run has a standby.
type Promoter interface {
	// Streaming names the node that accepts writes and a standby streaming
	// from it ("" when none does).
	Streaming(ctx context.Context) (primary, standby string, err error)
	// Promote makes standby the primary and waits until it accepts writes.
	Promote(ctx context.Context, standby string) error
	// WaitStreaming waits until standby streams from primary.
	WaitStreaming(ctx context.Context, primary, standby string) error
}

// ErrNoStandby means the service has no standby for the nemesis to promote.
var ErrNoStandby = errors.New("the lock service has no standby to promote (failover-promote needs --backend postgres)")

// FailoverPromote fails the primary over to its standby under a holder:
//
//  1. it waits until a standby streams from the primary (an old primary
//     still rejoining from the last step may be copying);
//  2. a client that holds the lock is parked right before its write;
//  3. the primary is SIGKILLed, and with it every session and advisory
//     lock (the kill event is when the checker ends the leases of the
//     sessions on it); the standby is promoted;
//  4. the first other client granted the lock, necessarily by the promoted
//     standby, is parked before its write too; it goes on, and env.Pause
//     later so does the holder, which writes on a belief that died with
//     the primary, after the new owner's write, and learns only at its
//     next statement;
//  5. the old primary is started again with its data wiped: it copies the
//     new primary and streams from it, so the next step can fail back.
//
// It lands when the holder held the lock at the failover and another
// client was granted it by the promoted standby while the holder still
// believed it held it.
func FailoverPromote(ctx context.Context, env *Env) (Landing, error) {
	svc, ok := env.Targets.Service().(Promoter)
	if !ok {
		return Landing{}, ErrNoStandby
	}
	primary, standby := streamingPair(ctx, svc)
	switch {
	case standby == "" && ctx.Err() != nil:
		return missed("the run ended before a standby streamed from the primary (the last step's old primary may still be copying)"), nil
	case standby == "":
		return missed("no standby streamed from the primary within %s", rejoinWait), nil
	}
	old, ok := findNode(env, primary).(Restarter)
	if !ok {
		return Landing{}, fmt.Errorf("the service names %s as primary, which is no node that can be restarted", primary)
	}

	a, leaveA, err := parkHolder(ctx, env, workloads.FailpointBeforeWrite)
	if err != nil || a == nil {
		return missed("no client held the lock and reached its write within %s", env.Patience), err
	}
	leaveA = sync.OnceFunc(leaveA)
	defer leaveA()
	v := history.Value{Target: a.Name(), Failpoint: workloads.FailpointBeforeWrite, Detail: "holds the lock on " + primary}
	if holder, ok := a.(SessionHolder); ok {
		v.Session = holder.Session()
	}
	env.Record(history.NemFailpoint, v)

	if err := kill(env, old, history.Value{Detail: "primary; " + standby + " is promoted"}); err != nil {
		return Landing{}, err
	}
	promoted := false
	defer func() {
		// The old primary comes back: wiped, as a standby of the promoted
		// node, or with its data, still the primary, if the promotion
		// failed.
		nowPrimary, nowStandby, detail := primary, standby, "data kept: the promotion failed"
		if promoted {
			nowPrimary, nowStandby, detail = standby, primary, "rejoins as a standby of "+standby+" (data wiped, pg_basebackup)"
		}
		if restart(ctx, env, old, promoted, detail) == nil {
			rctx, cancel := context.WithTimeout(ctx, rejoinWait)
			svc.WaitStreaming(rctx, nowPrimary, nowStandby) //nolint:errcheck // the next step waits for it too
			cancel()
		}
	}()
	// The promotion, once asked, is seen through even when the run is
	// ending, so that the old primary's restart finds the roles it expects.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), promoteWait)
	err = svc.Promote(pctx, standby)
	cancel()
	if err != nil {
		return missed("%s was not promoted: %v", standby, err), ignoreDeadline(err)
	}
	promoted = true
	env.Record(history.NemSwitchMaster, history.Value{Target: standby, Detail: primary + " -> " + standby})

	others := slices.DeleteFunc(slices.Clone(env.Targets.Clients()), func(c Client) bool { return c.Name() == a.Name() })
	b, leaveB := parkFirst(ctx, others, workloads.FailpointBeforeWrite, nil, env.Patience)
	if b == nil {
		return missed("no other client was granted the lock by the promoted %s within %s", standby, env.Patience), nil
	}
	env.Record(history.NemFailpoint, history.Value{Target: b.Name(), Failpoint: workloads.FailpointBeforeWrite,
		Detail: "granted the lock by the promoted " + standby + " while " + a.Name() + " holds it"})
	leaveB()
	sleepCtx(ctx, env.Pause)
	leaveA()
	return landed("%s held the lock on %s when it was killed; %s was promoted and granted it to %s while %s still believed it held it", a.Name(), primary, standby, b.Name(), a.Name()), nil
}

// promoteWait bounds a promotion: pg_promote waits up to 60 s for it.
const promoteWait = 70 * time.Second

// streamingPair waits, within rejoinWait, for a primary with a streaming
// standby and names both; the standby is "" when none came.
func streamingPair(ctx context.Context, svc Promoter) (string, string) {
	ctx, cancel := context.WithTimeout(ctx, rejoinWait)
	defer cancel()
	for {
		primary, standby, err := svc.Streaming(ctx)
		if err == nil && standby != "" {
			return primary, standby
		}
		sleepCtx(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return primary, ""
		}
	}
}
