package nemesis

import (
	"context"
)

func init() {
	register(Fault{Name: "partition-bridge", Inject: PartitionBridge, Needs: []Capability{CapMajority, CapLinks},
		Help: "split the nodes into two halves that still both reach one bridge node, for --pause, then heal (Jepsen's bridge): each half with the bridge is a majority"})
}

// PartitionBridge cuts the network into two halves joined by one node that
// reaches both, as Jepsen's bridge partition: with three or more nodes,
// each half with the bridge is a majority, which a consensus system must
// not let both act on. The clients are dealt out to the halves at random
// and reach the bridge from either. It lands when the split held for the
// whole pause.
func PartitionBridge(ctx context.Context, env *Env) (Landing, error) {
	nodes := env.Targets.Nodes()
	order := env.Rand.Perm(len(nodes))
	bridge := nodes[order[0]]
	s := split{mirror: true}
	half := (len(nodes) - 1) / 2
	deal(&s, nodes, order[1:], func(i int) bool { return i < half })
	clients := env.Targets.Clients()
	deal(&s, clients, env.Rand.Perm(len(clients)), func(i int) bool { return i%2 == 0 })
	held, err := s.hold(ctx, env)
	if err != nil {
		return Landing{}, err
	}
	l := heldSplit(env, names(s.side), held, env.Pause)
	l.Why += " (" + bridge.Name() + " the bridge)"
	return l, nil
}
