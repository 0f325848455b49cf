package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/lockcheck/lockcheck/history"
)

func init() {
	register(Fault{Name: "partition", Inject: Partition, Needs: []Capability{CapPartition},
		Help: "cut one node off the run's network (nodes and clients) for --pause, then heal it: the Sentinel master, the etcd leader, else a random node (a Redlock node)"})
}

// Partitioner is a node that can be cut off the network and joined again:
// a container on the run's own network (the docker runtime).
type Partitioner interface {
	Target
	Partition(ctx context.Context) error
	Heal(ctx context.Context) error
}

// Network is the run's links between nodes and clients, which lockcheck
// carries (the process runtime's proxies): a fault puts every link
// between a target of as and a target of bs in a state, and the zero
// LinkRule heals them.
type Network interface {
	Shape(as, bs []Target, rule LinkRule) error
}

// LinkRule is the state of a link; the zero rule passes everything.
type LinkRule struct {
	// Cut drops everything either way, as a partition does.
	Cut bool
	// Latency, plus up to Jitter more, delays every message either way.
	Latency, Jitter time.Duration
	// Reset is the share of the link's connections reset (0 to 1).
	Reset float64
}

// LinkConfig is how the network faults shape links.
type LinkConfig struct {
	// Clients is how many clients partition-minority puts with the cut
	// node; 0 means a minority of them (partition cuts a node off alone).
	Clients int
	Latency time.Duration
	Jitter  time.Duration
	Reset   float64
}

// Params of the network faults.
const (
	ParamPartitionClients = "partition-clients" // clients on the minority side
	ParamLatency          = "latency"           // slow-link's delay each way
	ParamJitter           = "jitter"            // up to this much more
	ParamResetShare       = "reset-share"       // flaky-link's share of connections reset
)

// Defaults of the network faults.
const (
	DefaultLatency    = 200 * time.Millisecond
	DefaultJitter     = 50 * time.Millisecond
	DefaultResetShare = 0.5
)

// LinkSettings reads the network faults' params; absent ones take their
// defaults.
func LinkSettings(params map[string]string) (LinkConfig, error) {
	s := LinkConfig{Latency: DefaultLatency, Jitter: DefaultJitter, Reset: DefaultResetShare}
	if v := params[ParamPartitionClients]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return s, fmt.Errorf("--%s %q: want a whole number of clients, 0 (a minority) or more", ParamPartitionClients, v)
		}
		s.Clients = n
	}
	for name, d := range map[string]*time.Duration{ParamLatency: &s.Latency, ParamJitter: &s.Jitter} {
		if v := params[name]; v != "" {
			parsed, err := time.ParseDuration(v)
			if err != nil || parsed < 0 {
				return s, fmt.Errorf("--%s %q: want a duration of 0 or more, such as 200ms", name, v)
			}
			*d = parsed
		}
	}
	if v := params[ParamResetShare]; v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1 {
			return s, fmt.Errorf("--%s %q: want a share above 0 and at most 1, such as 0.5", ParamResetShare, v)
		}
		s.Reset = f
	}
	return s, nil
}

// ErrNoPartition means the runtime cannot cut nodes off: local processes
// that reach each other directly all share loopback.
var ErrNoPartition = errors.New("the nodes cannot be cut off the network (partition needs --runtime docker or --network proxy)")

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
	if !ok && env.Network == nil {
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
	var held time.Duration
	if ok {
		if held, err = partitionContainer(ctx, env, p); err != nil {
			return Landing{}, err
		}
	} else {
		cut := split{side: []Target{target}, rest: everyoneBut(env, target)}
		if held, err = cut.hold(ctx, env); err != nil {
			return Landing{}, err
		}
	}
	l := landed("%s was cut off the network for %s", target.Name(), held.Round(time.Millisecond))
	if held+5*time.Millisecond < env.Pause {
		var ok bool
		if l, ok = cutShort(env, target.Name()+" was cut off the network", held, env.Pause); !ok {
			l = missed("%s was cut off %s of the %s asked: the run ended first", target.Name(), held.Round(time.Millisecond), env.Pause)
		}
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

// partitionContainer disconnects a container from the run's network for
// env.Pause and connects it again; it returns how long it was cut off.
func partitionContainer(ctx context.Context, env *Env, p Partitioner) (time.Duration, error) {
	if err := p.Partition(ctx); err != nil {
		return 0, err
	}
	env.Record(history.NemPartition, history.Value{Target: p.Name(), DurationMs: env.Pause.Milliseconds()})
	cut := time.Now()
	sleepCtx(ctx, env.Pause)
	held := time.Since(cut)
	// Heal even when the run is ending: teardown finds the node connected.
	healCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	herr := p.Heal(healCtx)
	env.Record(history.NemHeal, history.Value{Target: p.Name(), Detail: errText(herr)})
	return held, herr
}

// split is a partition of the run's network into two sides: every link
// between a target of side and one of rest is cut. The events name each
// target of side cut from the rest, and with mirror each target of rest
// cut from the side too (two halves, rather than a few targets cut off
// from everyone else).
type split struct {
	side, rest []Target
	mirror     bool
}

// deal puts targets in the split in the order perm: the i-th of them on
// the side when onSide(i), else in the rest.
func deal[T Target](s *split, targets []T, perm []int, onSide func(i int) bool) {
	for i, j := range perm {
		if onSide(i) {
			s.side = append(s.side, targets[j])
		} else {
			s.rest = append(s.rest, targets[j])
		}
	}
}

// hold cuts the split's links for env.Pause, recording each target of the
// side as cut from every target of the rest, and heals them, also when
// the run is ending. It returns how long the cut held.
func (s split) hold(ctx context.Context, env *Env) (time.Duration, error) {
	return s.holdWhile(ctx, env, func() { sleepCtx(ctx, env.Pause) })
}

// holdWhile is hold with the wait of the caller's choosing (watching the
// service while the cut holds).
func (s split) holdWhile(ctx context.Context, env *Env, wait func()) (time.Duration, error) {
	heal, err := s.cut(env)
	if err != nil {
		return 0, err
	}
	cut := time.Now()
	wait()
	held := time.Since(cut)
	return held, heal()
}

// cut cuts the split's links, recording each target of the side as cut
// from every target of the rest for env.Pause, and returns the heal, which
// connects them again and records it (also when the run is ending: teardown
// finds the links whole).
func (s split) cut(env *Env) (heal func() error, err error) {
	if err := env.Network.Shape(s.side, s.rest, LinkRule{Cut: true}); err != nil {
		return nil, err
	}
	// A client restarted meanwhile has another name by the heal; the heal
	// names what the cut named. The side's first target (the node a
	// minority is cut off with) is recorded last: a verdict names the
	// latest fault in force, and that node's cut is the story.
	cutNames, from := names(s.side), names(s.rest)
	slices.Reverse(cutNames)
	for _, name := range cutNames {
		env.Record(history.NemPartition, history.Value{Target: name, DurationMs: env.Pause.Milliseconds(), Links: from})
	}
	if s.mirror {
		for _, name := range from {
			env.Record(history.NemPartition, history.Value{Target: name, DurationMs: env.Pause.Milliseconds(), Links: names(s.side)})
		}
		cutNames = append(cutNames, from...)
	}
	return func() error {
		herr := env.Network.Shape(s.side, s.rest, LinkRule{})
		for _, name := range cutNames {
			env.Record(history.NemHeal, history.Value{Target: name, Detail: errText(herr)})
		}
		return herr
	}, nil
}

// everyoneBut is every node and client of the run but t.
func everyoneBut(env *Env, t Target) []Target {
	var out []Target
	for _, n := range env.Targets.Nodes() {
		if n.Name() != t.Name() {
			out = append(out, n)
		}
	}
	for _, c := range env.Targets.Clients() {
		out = append(out, c)
	}
	return out
}

func names(ts []Target) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name()
	}
	return out
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
