package nemesis

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/lockcheck/lockcheck/history"
)

func init() {
	Faults["kill-restart"] = KillRestart
	Describe["kill-restart"] = "SIGKILL a node and start it again after --restart-delay, wiping its data with --wipe"
	Faults["pause-nodes"] = PauseNodes
	Describe["pause-nodes"] = "SIGSTOP a minority of the nodes together for --pause"
}

// Params of the node faults.
const (
	ParamWipe         = "wipe"          // "true": a restarted node comes back empty
	ParamRestartDelay = "restart-delay" // a Go duration between kill and start
)

// KillRestart kills a random node and starts it again on the same ports,
// after the restart delay, with or without its data.
func KillRestart(ctx context.Context, env *Env) error {
	var nodes []Restarter
	for _, t := range env.Targets.Nodes() {
		if r, ok := t.(Restarter); ok {
			nodes = append(nodes, r)
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	n := nodes[env.Rand.IntN(len(nodes))]
	wipe := env.Params[ParamWipe] == "true"
	var delay time.Duration
	if s := env.Params[ParamRestartDelay]; s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%s %q: %w", ParamRestartDelay, s, err)
		}
		delay = d
	}
	detail := "data kept"
	if wipe {
		detail = "data wiped"
	}
	pid := n.PID()
	if err := n.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	env.Record(history.NemKill, history.Value{Target: n.Name(), PID: pid, Detail: detail})
	sleepCtx(ctx, delay)
	// Even when the run is ending the node must come back: teardown and the
	// end-of-run inspection expect every node up.
	if err := n.Restart(context.WithoutCancel(ctx), wipe); err != nil {
		return err
	}
	env.Record(history.NemStart, history.Value{Target: n.Name(), PID: n.PID(), Detail: detail})
	return nil
}

// PauseNodes stops a random minority of the nodes together, so that grants
// land on bare majorities, then continues them.
func PauseNodes(ctx context.Context, env *Env) error {
	nodes := env.Targets.Nodes()
	k := (len(nodes) - 1) / 2
	if k == 0 {
		return nil
	}
	picked := make([]Target, 0, k)
	for _, i := range env.Rand.Perm(len(nodes))[:k] {
		picked = append(picked, nodes[i])
	}
	for _, n := range picked {
		if err := n.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		env.Record(history.NemPause, history.Value{Target: n.Name(), PID: n.PID(), DurationMs: env.Pause.Milliseconds()})
	}
	sleepCtx(ctx, env.Pause)
	var firstErr error
	for _, n := range picked {
		if err := n.Signal(syscall.SIGCONT); err != nil && firstErr == nil {
			firstErr = err
		}
		env.Record(history.NemResume, history.Value{Target: n.Name(), PID: n.PID()})
	}
	return firstErr
}
