package nemesis

import (
	"context"
	"strings"
	"time"

	"github.com/lockcheck/lockcheck/history"
)

func init() {
	register(Fault{Name: "partition-minority", Inject: PartitionMinority, Needs: []Capability{CapLinks},
		Params: []string{ParamPartitionClients},
		Help:   "cut the Sentinel master (the etcd leader, else a random node: a Redlock node) together with --partition-clients clients (default a minority) off from the other nodes and clients for --pause, then heal: the old master goes on serving its side while the rest promote or elect another"})
}

// PartitionMinority splits the network in two: one node, the one whose
// loss matters most (see partitionTarget), with a few clients on one
// side, every other node and client on the other, for env.Pause. It is
// Jepsen's Redis partition: the master keeps granting its clients while
// the sentinels on the other side promote a replica, so two masters grant
// at once unless the old one refuses to write without replicas
// (min-replicas-to-write).
//
// It lands when the split held for the whole pause and, on a service
// that fails over or elects, the majority side had a master or leader of
// its own while the split held: only then can both sides grant, which is
// the moment the fault exists for. A service without either (Redlock's
// independent nodes) has two sides as soon as the split holds. The landing
// also says which minority clients were granted the lock during the split.
func PartitionMinority(ctx context.Context, env *Env) (Landing, error) {
	target, svc, err := partitionTarget(ctx, env)
	if err != nil || target == nil {
		return missed("the service named no master or leader to cut off (between states)"), err
	}
	clients := env.Targets.Clients()
	k := env.Settings.Links.Clients
	if k == 0 {
		k = max(1, (len(clients)-1)/2)
	}
	k = min(k, len(clients))
	s := split{side: []Target{target}}
	deal(&s, clients, env.Rand.Perm(len(clients)), func(i int) bool { return i < k })
	for _, n := range env.Targets.Nodes() {
		if n.Name() != target.Name() {
			s.rest = append(s.rest, n)
		}
	}

	minority := names(s.side[1:]) // as the cut names them
	var (
		switched = make(chan string, 1)
		waitDone = make(chan struct{})
	)
	if svc != nil {
		// Listen before the cut, so that a quick promotion is not missed.
		switchCtx, cancel := context.WithTimeout(ctx, env.Pause+rejoinWait)
		defer cancel()
		wait, err := svc.AwaitSwitch(switchCtx, target.Name())
		if err != nil {
			return Landing{}, err
		}
		go func() {
			defer close(waitDone)
			if promoted, err := wait(); err == nil {
				switched <- promoted
			}
		}()
	} else {
		close(waitDone)
	}
	cutAt := history.Now()
	var (
		otherSide string   // the master or leader the majority side had during the split
		granted   []string // minority clients granted during it
	)
	held, err := s.holdWhile(ctx, env, func() {
		sleepCtx(ctx, env.Pause)
		granted = grantedSince(s.side[1:], cutAt)
		select {
		case otherSide = <-switched:
		default:
		}
		if finder, ok := env.Targets.Service().(LeaderFinder); ok && svc == nil {
			otherSide = otherLeader(ctx, env, finder, target.Name())
		}
	})
	if err != nil {
		return Landing{}, err
	}
	if svc != nil && ctx.Err() == nil {
		// The old master rejoins as a replica of the promoted node before
		// the next fault.
		<-waitDone
		select {
		case promoted := <-switched:
			awaitRejoin(ctx, svc, target.Name(), promoted)
		default:
			if otherSide != "" {
				awaitRejoin(ctx, svc, target.Name(), otherSide)
			}
		}
	}
	who := target.Name() + " with " + listOrNone(minority)
	// Both sides can grant once the other side has a master or leader of
	// its own (on a service with neither, as soon as the split holds, and
	// it has done what it can once it has held for a lease): that moment,
	// once created, stands when the end of the run cuts the split short.
	twoSides := env.Targets.Service() == nil || otherSide != "" || (svc == nil && !isLeaderFinder(env))
	cut := held+5*time.Millisecond < env.Pause
	switch {
	case cut && (!twoSides || otherSide == "" && held < env.Lease):
		return missed("%s was cut off %s of the %s asked: the run ended first", who, held.Round(time.Millisecond), env.Pause), nil
	case !twoSides:
		return missed("%s was cut off for %s, but the other side had no master or leader of its own by then", who, held.Round(time.Millisecond)), nil
	}
	l := landed("%s was cut off from the rest for %s", who, held.Round(time.Millisecond))
	if cut {
		l = landed("%s was cut off from the rest, %s", who, cutShortBy(held, env.Pause))
	}
	if otherSide != "" {
		l.Why += ", while the other side had " + otherSide
	}
	if len(granted) > 0 {
		l.Why += "; granted on the minority side during the split: " + strings.Join(granted, ", ")
	}
	return l, nil
}

func isLeaderFinder(env *Env) bool {
	_, ok := env.Targets.Service().(LeaderFinder)
	return ok
}

// otherLeader asks the service, while the split holds, for a leader other
// than the cut one; empty when there is none.
func otherLeader(ctx context.Context, env *Env, finder LeaderFinder, cut string) string {
	askCtx, cancel := context.WithTimeout(ctx, min(env.Patience, 5*time.Second))
	defer cancel()
	for askCtx.Err() == nil {
		if name, err := finder.Leader(askCtx); err == nil && name != cut {
			return name
		}
		sleepCtx(askCtx, 100*time.Millisecond)
	}
	return ""
}

// grantedSince names the clients whose latest grant came after since (on
// the history's clock).
func grantedSince(clients []Target, since int64) []string {
	var out []string
	for _, c := range clients {
		if gt, ok := c.(GrantTimes); ok {
			if _, at := gt.Grant(); at > since {
				out = append(out, c.Name())
			}
		}
	}
	return out
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "no client"
	}
	return strings.Join(names, ", ")
}
