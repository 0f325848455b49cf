package nemesis

import (
	"context"
	"fmt"
	"time"

	"github.com/lockcheck/lockcheck/history"
)

func init() {
	register(Fault{Name: "slow-link", Inject: SlowLink, Needs: []Capability{CapShape},
		Params: []string{ParamLatency, ParamJitter},
		Help:   "delay every message on the links of one target by --latency plus up to --jitter, for --pause: the Sentinel master's or the etcd leader's links, else one client's links to every node (its replies come late, eating a Redlock grant's validity)"})
}

// SlowLink slows every link of one target for env.Pause and restores
// them. It lands when the links stayed slow for the whole pause.
func SlowLink(ctx context.Context, env *Env) (Landing, error) {
	l := env.Settings.Links
	return shapeLinks(ctx, env, LinkRule{Latency: l.Latency, Jitter: l.Jitter}, history.NemSlowLink, history.NemSlowLinkEnd,
		fmt.Sprintf("%s plus up to %s each way", l.Latency, l.Jitter))
}

// shapeLinks puts the links of a target (linkTarget) in rule for
// env.Pause, recording start and end with verbs, and heals them, also when
// the run is ending.
func shapeLinks(ctx context.Context, env *Env, rule LinkRule, start, end, how string) (Landing, error) {
	target, others, err := linkTarget(ctx, env)
	if err != nil || target == nil {
		return missed("the service named no master or leader, and no client ran"), err
	}
	if err := env.Network.Shape([]Target{target}, others, rule); err != nil {
		return Landing{}, err
	}
	name := target.Name()
	env.Record(start, history.Value{Target: name, DurationMs: env.Pause.Milliseconds(), Links: names(others), Detail: how})
	began := time.Now()
	sleepCtx(ctx, env.Pause)
	held := time.Since(began)
	herr := env.Network.Shape([]Target{target}, others, LinkRule{})
	env.Record(end, history.Value{Target: name, Detail: errText(herr)})
	if herr != nil {
		return Landing{}, herr
	}
	if held+5*time.Millisecond < env.Pause {
		if l, ok := cutShort(env, fmt.Sprintf("%s's links to %s were shaped (%s)", name, listOrNone(names(others)), how), held, env.Pause); ok {
			return l, nil
		}
		return missed("%s's links were shaped (%s) for %s of the %s asked: the run ended first", name, how, held.Round(time.Millisecond), env.Pause), nil
	}
	return landed("%s's links to %s were shaped (%s) for %s", name, listOrNone(names(others)), how, held.Round(time.Millisecond)), nil
}

// linkTarget picks whose links a link fault shapes: the master or leader
// with everyone else, or, for a service with neither (Redlock's
// independent nodes), a random client with every node.
func linkTarget(ctx context.Context, env *Env) (Target, []Target, error) {
	svc := env.Targets.Service()
	_, failover := svc.(FailoverService)
	_, leads := svc.(LeaderFinder)
	if failover || leads {
		t, _, err := partitionTarget(ctx, env)
		if t == nil {
			return nil, nil, err
		}
		return t, everyoneBut(env, t), err
	}
	clients := env.Targets.Clients()
	if len(clients) == 0 {
		return nil, nil, nil
	}
	return clients[env.Rand.IntN(len(clients))], env.Targets.Nodes(), nil
}
