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
	var s split
	s.mirror = true
	for i, j := range env.Rand.Perm(len(nodes)) {
		if i < minority {
			s.side = append(s.side, nodes[j])
		} else {
			s.rest = append(s.rest, nodes[j])
		}
	}
	clients := env.Targets.Clients()
	for i, j := range env.Rand.Perm(len(clients)) {
		if i*len(nodes) < minority*len(clients) {
			s.side = append(s.side, clients[j])
		} else {
			s.rest = append(s.rest, clients[j])
		}
	}
	held, err := s.hold(ctx, env)
	if err != nil {
		return Landing{}, err
	}
	return heldSplit(names(s.side), held, env.Pause), nil
}

// heldSplit says whether a split held for the asked d, naming its side.
func heldSplit(side []string, held, d time.Duration) Landing {
	who := listOrNone(side)
	if held+5*time.Millisecond < d {
		return missed("%s was cut from the rest %s of the %s asked: the run ended first", who, held.Round(time.Millisecond), d)
	}
	return landed("%s was cut from the rest for %s", who, held.Round(time.Millisecond))
}
