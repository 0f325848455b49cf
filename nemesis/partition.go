package nemesis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockcheck/lockcheck/history"
)

func init() {
	register(Fault{Name: "partition", Inject: Partition, Needs: []Capability{CapPartition},
		Help: "cut one node off the run's network for --pause, then heal it: the Sentinel master, the etcd leader, else a random node (a Redlock node). Needs --runtime docker"})
}

// Partitioner is a node that can be cut off the network and joined again:
// a container on the run's own network (the docker runtime).
type Partitioner interface {
	Target
	Partition(ctx context.Context) error
	Heal(ctx context.Context) error
}

// ErrNoPartition means the runtime cannot cut nodes off: local processes
// all share loopback.
var ErrNoPartition = errors.New("the nodes cannot be cut off the network (partition needs --runtime docker)")

// Partition cuts one node off the run's network, so that neither the other
// nodes nor any client reach it and it reaches no one, for env.Pause, then
// connects it again. It picks the node whose loss matters most: the master
// of a service with failover (Sentinel), the leader of one that elects
// (etcd), otherwise any node (one of Redlock's independent masters). It
// lands when the node was unreachable for the whole pause.
func Partition(ctx context.Context, env *Env) (Landing, error) {
	target, svc, err := partitionTarget(ctx, env)
	if err != nil || target == nil {
		return missed("the service named no master or leader to cut off (between states)"), err
	}
	p, ok := target.(Partitioner)
	if !ok {
		return Landing{}, ErrNoPartition
	}
	var awaitSwitch func() (string, error)
	if svc != nil {
		// Listen before the cut, so that a quick promotion is not missed.
		switchCtx, cancel := context.WithTimeout(ctx, env.Pause+rejoinWait)
		defer cancel()
		if wait, err := svc.AwaitSwitch(switchCtx, target.Name()); err == nil {
			awaitSwitch = wait
		}
	}
	if err := p.Partition(ctx); err != nil {
		return Landing{}, err
	}
	env.Record(history.NemPartition, history.Value{Target: target.Name(), DurationMs: env.Pause.Milliseconds()})
	cut := time.Now()
	sleepCtx(ctx, env.Pause)
	held := time.Since(cut)
	// Heal even when the run is ending: teardown finds the node connected.
	healCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	herr := p.Heal(healCtx)
	env.Record(history.NemHeal, history.Value{Target: target.Name(), Detail: errText(herr)})
	if herr != nil {
		return Landing{}, herr
	}
	l := landed("%s was cut off the network for %s", target.Name(), held.Round(time.Millisecond))
	if held+5*time.Millisecond < env.Pause {
		l = missed("%s was cut off %s of the %s asked: the run ended first", target.Name(), held.Round(time.Millisecond), env.Pause)
	}
	if awaitSwitch != nil && ctx.Err() == nil {
		// A master cut off long enough was replaced; it rejoins as a
		// replica of the promoted node before the next fault. The wait
		// ends with the run, too.
		if promoted, err := awaitSwitch(); err == nil {
			awaitRejoin(ctx, svc, target.Name(), promoted)
		}
	}
	return l, nil
}

// partitionTarget names the node to cut off; nil with no error means the
// service is between states (a failover or an election): the next step
// tries again.
func partitionTarget(ctx context.Context, env *Env) (Target, FailoverService, error) {
	switch svc := env.Targets.Service().(type) {
	case FailoverService:
		svcFound, master, err := failoverMaster(ctx, env)
		return master, svcFound, err
	case LeaderFinder:
		askCtx, cancel := context.WithTimeout(ctx, env.Patience)
		name, err := svc.Leader(askCtx)
		cancel()
		if err != nil {
			return nil, nil, nil
		}
		if t := findNode(env, name); t != nil {
			return t, nil, nil
		}
		return nil, nil, fmt.Errorf("the service named %q as its leader, which is none of its nodes", name)
	}
	nodes := env.Targets.Nodes()
	if len(nodes) == 0 {
		return nil, nil, nil
	}
	return nodes[env.Rand.IntN(len(nodes))], nil, nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return "healing failed: " + err.Error()
}
