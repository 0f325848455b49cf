package nemesis

import (
	"context"
	"time"
)

func init() {
	register(Fault{Name: "partition-halves", Inject: PartitionHalves, Needs: []Capability{CapMajority, CapLinks},
		Help: "split the nodes at random into a majority and a minority, with the clients shared between them alike, for --pause, then heal (Jepsen's halves)"})
}

// PartitionHalves splits the network in two at random: a minority of the
// nodes and a majority, the clients dealt out to the two sides in the
// same proportion, as Jepsen's partition-random-halves does. It lands when
// the split held for the whole pause.
func PartitionHalves(ctx context.Context, env *Env) (Landing, error) {
	nodes := env.Targets.Nodes()
	minority := len(nodes) / 2
	s := split{mirror: true}
	deal(&s, nodes, env.Rand.Perm(len(nodes)), func(i int) bool { return i < minority })
	clients := env.Targets.Clients()
	deal(&s, clients, env.Rand.Perm(len(clients)), func(i int) bool { return i*len(nodes) < minority*len(clients) })
	held, err := s.hold(ctx, env)
	if err != nil {
		return Landing{}, err
	}
	return heldSplit(env, names(s.side), held, env.Pause), nil
}

// heldSplit says whether a split held for the asked d, naming its side.
func heldSplit(env *Env, side []string, held, d time.Duration) Landing {
	who := listOrNone(side)
	if held+5*time.Millisecond < d {
		if l, ok := cutShort(env, who+" was cut from the rest", held, d); ok {
			return l
		}
		return missed("%s was cut from the rest %s of the %s asked: the run ended first", who, held.Round(time.Millisecond), d)
	}
	return landed("%s was cut from the rest for %s", who, held.Round(time.Millisecond))
}
