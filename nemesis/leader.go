package nemesis

import (
	"context"
	"errors"
	"fmt"
)

func init() {
	register(Fault{Name: "pause-leader", Inject: PauseLeader, Needs: []Capability{CapLeader},
		Help: "SIGSTOP the node the service names as its leader (etcd's raft leader, Sentinel's master) for --pause"})
}

// LeaderFinder is a service that can name the node leading it now. The
// backend's handle (Targets.Service) offers it where there is a leader.
type LeaderFinder interface {
	Leader(ctx context.Context) (string, error)
}

// ErrNoLeader means the service has no leader to ask for.
var ErrNoLeader = errors.New("the lock service has no leader to pause (pause-leader needs a backend such as etcd)")

// PauseLeader asks the service which node leads and stops that node: the
// cluster must elect another while the old leader, stopped mid-term, still
// believes it leads. It lands when the leader stayed stopped for env.Pause.
func PauseLeader(ctx context.Context, env *Env) (Landing, error) {
	finder, ok := env.Targets.Service().(LeaderFinder)
	if !ok {
		return Landing{}, ErrNoLeader
	}
	askCtx, cancel := context.WithTimeout(ctx, env.Patience)
	name, err := finder.Leader(askCtx)
	cancel()
	if err != nil {
		// No leader now (an election in progress, a member stopped by
		// another fault): the next step asks again.
		return missed("the service named no leader within %s: %v", env.Patience, err), nil
	}
	n := findNode(env, name)
	if n == nil {
		return Landing{}, fmt.Errorf("the service named %q as its leader, which is none of its nodes", name)
	}
	return pauseFor(ctx, env, n)
}

func findNode(env *Env, name string) Target {
	for _, n := range env.Targets.Nodes() {
		if n.Name() == name {
			return n
		}
	}
	return nil
}
