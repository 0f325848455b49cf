package nemesis

import (
	"context"
	"time"

	"github.com/lockcheck/lockcheck/history"
)

func init() {
	register(Fault{Name: "kill-restart", Inject: KillRestart, Needs: []Capability{CapRestart},
		Params: []string{ParamRestartDelay, ParamWipe},
		Help:   "SIGKILL a node and start it again after --restart-delay, wiping its data with --wipe"})
	register(Fault{Name: "pause-nodes", Inject: PauseNodes, Needs: []Capability{CapMajority},
		Help: "SIGSTOP a minority of the nodes together for --pause"})
}

// KillRestart kills a random node and starts it again on the same ports,
// after the restart delay, with or without its data. It lands when the node
// was down for the whole delay and came back.
func KillRestart(ctx context.Context, env *Env) (Landing, error) {
	var nodes []Restarter
	for _, t := range env.Targets.Nodes() {
		if r, ok := t.(Restarter); ok {
			nodes = append(nodes, r)
		}
	}
	if len(nodes) == 0 {
		return missed("no node of the service can be restarted"), nil
	}
	n := nodes[env.Rand.IntN(len(nodes))]
	detail := env.Settings.wipeDetail()
	if err := kill(env, n, history.Value{Detail: detail}); err != nil {
		return Landing{}, err
	}
	killed := time.Now()
	sleepCtx(ctx, env.Settings.RestartDelay)
	if err := restart(ctx, env, n, env.Settings.Wipe, detail); err != nil {
		return Landing{}, err
	}
	return landed("%s was down %s (%s)", n.Name(), time.Since(killed).Round(time.Millisecond), detail), nil
}

// PauseNodes stops a random minority of the nodes together, so that grants
// land on bare majorities, then continues them. It lands when they stayed
// stopped for env.Pause.
func PauseNodes(ctx context.Context, env *Env) (Landing, error) {
	nodes := env.Targets.Nodes()
	k := (len(nodes) - 1) / 2
	if k == 0 {
		return missed("%d nodes have no minority to stop", len(nodes)), nil
	}
	h := &healer{env: env}
	defer h.heal()
	for _, i := range env.Rand.Perm(len(nodes))[:k] {
		if err := h.stop(nodes[i], history.Value{DurationMs: env.Pause.Milliseconds()}); err != nil {
			return Landing{}, err
		}
	}
	stopped := time.Now()
	sleepCtx(ctx, env.Pause)
	held := time.Since(stopped)
	h.heal()
	return heldFor(env, h.order[0], h.order[0].Name()+" was stopped", held, env.Pause), nil
}
