package nemesis

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads"
)

// Every fault × topology pair is decided by the fault's needs, before a
// run starts.
func TestValidateRefusesWhatTheTopologyLacks(t *testing.T) {
	redlock := Topology{Backend: "redlock", Runtime: "process", Nodes: 5, ClockNodes: 5,
		Offers: []Capability{CapNodes, CapRestart, CapWipe, CapClock, CapAllClocks, CapMajority}}
	etcd := Topology{Backend: "etcd", Runtime: "process", Nodes: 3, Offers: []Capability{CapNodes, CapRestart, CapWipe, CapMajority, CapLeader}}
	redis := Topology{Backend: "redis", Runtime: "process", Nodes: 1, Offers: []Capability{CapNodes, CapRestart, CapWipe}}
	docker := redis
	docker.Runtime, docker.Offers = "docker", []Capability{CapNodes, CapRestart, CapWipe, CapPartition}
	postgres := Topology{Backend: "postgres", Runtime: "process", Nodes: 1, Offers: []Capability{CapNodes, CapRestart, CapWipe, CapSessions}}
	standby := Topology{Backend: "postgres", Runtime: "process", Nodes: 2, Offers: []Capability{CapNodes, CapRestart, CapSessions, CapPromote}}
	tests := []struct {
		name   string
		faults []string
		params map[string]string
		top    Topology
		need   Capability // "" when the faults are fine
		err    string
	}{
		{"pause-leader without a leader", []string{"pause-leader"}, nil, redlock, CapLeader, ""},
		{"pause-leader on etcd", []string{"pause-leader"}, nil, etcd, "", ""},
		{"clock-pause without faked clocks", []string{"clock-pause"}, nil, etcd, CapAllClocks, ""},
		{"clock-pause on one node", []string{"clock-pause"}, nil, redis, CapMajority, ""},
		{"clock-pause on redlock", []string{"clock-pause"}, nil, redlock, "", ""},
		{"partition under processes", []string{"partition"}, nil, redis, CapPartition, ""},
		{"partition under docker", []string{"partition"}, nil, docker, "", ""},
		{"failover without failover", []string{"pause-node", "failover-kill"}, nil, etcd, CapFailover, ""},
		{"pause-nodes on one node", []string{"pause-nodes"}, nil, redis, CapMajority, ""},
		{"failover-promote without a standby", []string{"failover-promote"}, nil, postgres, CapPromote, ""},
		{"failover-promote with a standby", []string{"kill-session", "failover-promote"}, nil, standby, "", ""},
		{"kill-restart of a replicated primary", []string{"kill-restart"}, nil, standby, "", ""},
		{"kill-restart --wipe of a replicated primary", []string{"kill-restart"}, map[string]string{ParamWipe: "true"}, standby, CapWipe, ""},
		{"kill-restart --wipe of a lone primary", []string{"kill-restart"}, map[string]string{ParamWipe: "true"}, postgres, "", ""},
		{"restart-pause restarts nodes empty", []string{"restart-pause"}, nil, Topology{Backend: "x", Runtime: "process", Nodes: 3, Offers: []Capability{CapNodes, CapRestart, CapMajority}}, CapWipe, ""},
		{"faults every service takes", []string{"pause-holder", "pause-client", "pause-node", "kill-client", "kill-restart"}, nil, redis, "", ""},
		{"clock-skew of a majority", []string{"clock-skew"}, map[string]string{ParamSkewNodes: "3"}, redlock, "", "--skew-nodes 3: at most 2 of the 5 nodes"},
		{"a negative restart delay", []string{"kill-restart"}, map[string]string{ParamRestartDelay: "-1s"}, redis, "", "--restart-delay \"-1s\""},
		{"an unknown fault", []string{"pause-everything"}, nil, redis, "", "unknown nemesis \"pause-everything\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.faults, tt.params, tt.top)
			var missing *UnavailableError
			switch {
			case tt.need != "":
				require.ErrorAs(t, err, &missing)
				assert.Equal(t, tt.need, missing.Need)
				assert.Contains(t, err.Error(), "backend "+tt.top.Backend)
			case tt.err != "":
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
			default:
				assert.NoError(t, err)
			}
		})
	}
}

// Every fault declares help and an Inject; its needs are known
// capabilities.
func TestEveryFaultIsDeclared(t *testing.T) {
	require.NotEmpty(t, Names())
	for _, name := range Names() {
		f, ok := Lookup(name)
		require.True(t, ok)
		assert.NotEmpty(t, f.Help, name)
		assert.NotNil(t, f.Inject, name)
		for _, need := range f.Needs {
			assert.NotEmpty(t, capabilityText[need], "%s needs %q, which says nothing", name, need)
		}
	}
}

func baseEnv(targets Targets, rec *recorder) Env {
	return Env{Targets: targets, Record: rec.record, Rand: rand.New(rand.NewPCG(1, 2)),
		Pause: 100 * time.Millisecond, Lease: time.Second, OpTimeout: 100 * time.Millisecond, Patience: time.Second}
}

// Run stamps every event of a step with its number and ends each step with
// its landing; a fault whose signal fails misses with the error.
func TestRunRecordsEachStepsLanding(t *testing.T) {
	nodes := newNodes(1, 0)
	rec := &recorder{}
	targets := &fakeTargets{nodes: []Target{nodes[0]}, holders: func() []Client { return nil }}
	steps := []Step{{At: 0, Fault: "pause-node", Seed: 1}, {At: 10 * time.Millisecond, Fault: "pause-node", Seed: 2}}
	require.NoError(t, Run(context.Background(), steps, time.Now(), baseEnv(targets, rec)))

	verbs, values := rec.list()
	assert.Equal(t, []string{history.NemPause, history.NemResume, history.NemLanding, history.NemPause, history.NemResume, history.NemLanding}, verbs)
	for i, v := range values {
		assert.Equal(t, history.Int(1+i/3), v.Step, "event %d (%s)", i, verbs[i])
	}
	require.NotNil(t, values[2].Landed)
	assert.True(t, *values[2].Landed, values[2].Detail)
	assert.Equal(t, "pause-node", values[2].Fault)
	assert.Equal(t, []syscall.Signal{syscall.SIGSTOP, syscall.SIGCONT, syscall.SIGSTOP, syscall.SIGCONT}, nodes[0].got())

	nodes[0].failWith = errSignal
	rec = &recorder{}
	err := Run(context.Background(), steps[:1], time.Now(), baseEnv(targets, rec))
	require.ErrorIs(t, err, errSignal)
	verbs, values = rec.list()
	assert.Equal(t, []string{history.NemLanding}, verbs)
	assert.False(t, *values[0].Landed)
	assert.Contains(t, values[0].Detail, errSignal.Error())
}

// A pause cut short by the end of the run did not stay for its duration:
// it missed.
func TestAPauseCutShortMisses(t *testing.T) {
	nodes := newNodes(1, 0)
	rec := &recorder{}
	env := baseEnv(&fakeTargets{nodes: []Target{nodes[0]}}, rec)
	env.Pause = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	l, err := PauseNode(ctx, &env)
	require.NoError(t, err)
	assert.False(t, l.Landed)
	assert.Contains(t, l.Why, "the run ended first")
	assert.Equal(t, []syscall.Signal{syscall.SIGSTOP, syscall.SIGCONT}, nodes[0].got(), "the node is continued whatever happens")
}

// pause-holder lands only when the holder stayed stopped past its TTL.
func TestPauseHolderLandsPastTheTTL(t *testing.T) {
	tests := []struct {
		name   string
		pause  time.Duration
		landed bool
	}{
		{"shorter than the TTL", 10 * time.Millisecond, false},
		{"longer than the TTL", 1100 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClients(1)[0]
			rec := &recorder{}
			env := baseEnv(&fakeTargets{clients: []Client{c}, holders: func() []Client { return []Client{c} }}, rec)
			env.Lease, env.Pause = time.Second, tt.pause
			l, err := PauseHolder(context.Background(), &env)
			require.NoError(t, err)
			assert.Equal(t, tt.landed, l.Landed, l.Why)
			assert.Equal(t, []string{workloads.FailpointBeforeWrite}, c.parked)
		})
	}
}

// No holder within the patience: missed, nothing signalled.
func TestPauseHolderWithNoHolderMisses(t *testing.T) {
	c := newClients(1)[0]
	rec := &recorder{}
	env := baseEnv(&fakeTargets{clients: []Client{c}, holders: func() []Client { return nil }}, rec)
	env.Patience = 50 * time.Millisecond
	l, err := PauseHolder(context.Background(), &env)
	require.NoError(t, err)
	assert.False(t, l.Landed)
	assert.Contains(t, l.Why, "no client held the lock")
	assert.Empty(t, c.got())
}

// splitMajority adapts to how long this machine takes to bring the minority
// back: it holds the first client within its lease until the second comes;
// when the minority cannot be back within the lease, it misses and names a
// TTL that would do.
func TestMajoritySplitAdaptsToTheRestartTime(t *testing.T) {
	tests := []struct {
		name    string
		fault   func(context.Context, *Env) (Landing, error)
		restart time.Duration // how long a node takes to come back
		delay   time.Duration // --restart-delay
		ttl     time.Duration
		bComes  bool // a second client is granted once the minority is back
		landed  bool
		why     []string
	}{
		{"clock-pause, a fast machine", ClockPause, 20 * time.Millisecond, 0, time.Second, true, true, []string{"c1 was granted the lock", "within c0's 1s lease"}},
		{"clock-pause, a restart slower than a short lease", ClockPause, 700 * time.Millisecond, 0, 500 * time.Millisecond, true, false,
			[]string{"the minority came back", "after the kill", "a --ttl of at least"}},
		{"clock-pause, a restart that takes most of the lease", ClockPause, 500 * time.Millisecond, 0, time.Second, true, true, []string{"c1 was granted the lock"}},
		{"clock-pause, no second client", ClockPause, 20 * time.Millisecond, 0, 300 * time.Millisecond, false, false, []string{"no other client was granted the lock"}},
		{"restart-pause, the documented mitigation", RestartPause, 10 * time.Millisecond, 400 * time.Millisecond, 300 * time.Millisecond, false, true, []string{"the documented mitigation"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			nodes := newNodes(5, tt.restart)
			clients := newClients(2)
			a, b := clients[0], clients[1]
			var restarted atomic.Int32
			for _, n := range nodes {
				n.onRestart = func() { restarted.Add(1) }
			}
			free := freeAtFirst(tt.ttl / 2)
			targets := &fakeTargets{clients: []Client{a, b}, holders: func() []Client {
				switch {
				case free():
					return nil // the lock is free after the minority stopped
				case tt.bComes && restarted.Load() >= 2:
					return []Client{a, b}
				}
				return []Client{a}
			}}
			for _, n := range nodes {
				targets.nodes = append(targets.nodes, n)
			}
			rec := &recorder{}
			env := baseEnv(targets, rec)
			env.Lease, env.Patience, env.Pause = tt.ttl, 2*time.Second, 50*time.Millisecond
			env.Settings = Settings{Clock: ClockConfig{Skew: 20 * time.Second}, RestartDelay: tt.delay, Wipe: true}

			l, err := tt.fault(context.Background(), &env)
			require.NoError(t, err)
			assert.Equal(t, tt.landed, l.Landed, l.Why)
			for _, want := range tt.why {
				assert.Contains(t, l.Why, want)
			}
			assert.Equal(t, []string{workloads.FailpointBeforeLeaseCheck}, a.parked, "the first client is held before its lease check")
			stopped := 0
			for _, n := range nodes {
				assert.Zero(t, n.Clock(), "%s's clock is put back", n.Name())
				if got := n.got(); len(got) > 0 && got[0] == syscall.SIGSTOP {
					stopped++
					assert.Equal(t, []syscall.Signal{syscall.SIGSTOP, syscall.SIGKILL}, got, "%s is killed while stopped", n.Name())
					assert.Equal(t, 1, n.restarts, "%s comes back", n.Name())
				}
			}
			assert.Equal(t, 2, stopped, "a minority of two of the five nodes is stopped")
		})
	}
}

func TestSmallestTTL(t *testing.T) {
	tests := []struct {
		needed, ttl time.Duration
	}{
		{0, 200 * time.Millisecond},
		{300 * time.Millisecond, 500 * time.Millisecond},
		{1400 * time.Millisecond, 1900 * time.Millisecond},
	}
	for _, tt := range tests {
		got := SmallestTTL(tt.needed)
		assert.Equal(t, tt.ttl, got, "needed %s", tt.needed)
		// The TTL it names leaves room: the nodes are back, and a second
		// acquire done, within the lease less the fifth kept in hand.
		assert.Greater(t, got-got/5, tt.needed)
	}
}

// A failure to restart a node is recorded, and the fault still ends with
// every node it stopped accounted for.
func TestKillRestartReportsAFailedRestart(t *testing.T) {
	nodes := newNodes(1, 0)
	nodes[0].restartErr = errSignal
	rec := &recorder{}
	env := baseEnv(&fakeTargets{nodes: []Target{nodes[0]}}, rec)
	_, err := KillRestart(context.Background(), &env)
	require.ErrorIs(t, err, errSignal)
	verbs, values := rec.list()
	assert.Equal(t, []string{history.NemKill, history.NemStart}, verbs)
	assert.Contains(t, values[1].Detail, "restart failed")
}

// timedClient says when its grant was asked for and given, as the harness's
// workers do.
type timedClient struct {
	*fakeClient
	invoke, ok atomic.Int64
}

func (c *timedClient) Grant() (int64, int64) { return c.invoke.Load(), c.ok.Load() }

// A lease is judged from the acquire's invoke, as the checker judges it: a
// first client whose acquire took most of its TTL leaves no room, and a
// second grant after its lease is a miss, not a landing.
func TestMajoritySplitJudgesTheLeaseFromTheInvoke(t *testing.T) {
	const ttl = 600 * time.Millisecond
	nodes := newNodes(5, 150*time.Millisecond)
	fa, fb := newClients(2)[0], newClients(2)[1]
	a, b := &timedClient{fakeClient: fa}, &timedClient{fakeClient: fb}
	var restarted atomic.Int32
	for _, n := range nodes {
		n.onRestart = func() {
			if restarted.Add(1) == 2 {
				b.invoke.Store(history.Now())
				b.ok.Store(history.Now())
			}
		}
	}
	free := freeAtFirst(ttl / 2)
	targets := &fakeTargets{clients: []Client{a, b}, holders: func() []Client {
		switch {
		case free():
			return nil
		case restarted.Load() >= 2:
			return []Client{a, b}
		}
		if a.invoke.Load() == 0 {
			// A asked for the lock long ago: its acquire took most of
			// its TTL.
			a.invoke.Store(history.Now() - int64(ttl*8/10))
			a.ok.Store(history.Now())
		}
		return []Client{a}
	}}
	for _, n := range nodes {
		targets.nodes = append(targets.nodes, n)
	}
	env := baseEnv(targets, &recorder{})
	env.Lease, env.Patience, env.Pause = ttl, 2*time.Second, 10*time.Millisecond
	env.Settings = Settings{Clock: ClockConfig{Skew: 20 * time.Second}, Wipe: true}
	l, err := ClockPause(context.Background(), &env)
	require.NoError(t, err)
	assert.False(t, l.Landed, l.Why)
	assert.Contains(t, l.Why, "c0's lease")
}

// freeAtFirst says the lock is free for d after it is first asked (when the
// fault has stopped the minority and looks for a fresh holder), and once
// more after that, so the fault sees it free after its settling time (d is
// longer) however slowly this machine runs.
func freeAtFirst(d time.Duration) func() bool {
	var (
		mu      sync.Mutex
		first   time.Time
		sawLate bool
	)
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		if first.IsZero() {
			first = time.Now()
		}
		if time.Since(first) < d {
			return true
		}
		late := !sawLate
		sawLate = true
		return late
	}
}

// A soak's segments run one plan drawn for the whole soak: their windows
// together are the plan, each timed from its segment's start, and a
// window with no step is an empty schedule, not a missing one.
func TestWindowsCoverThePlan(t *testing.T) {
	plan := Plan(7, []string{"pause-holder", "kill-client"}, 3*time.Second, 20*time.Second)
	var joined []Step
	for from := time.Duration(0); from < 20*time.Second; from += 5 * time.Second {
		for _, s := range Window(plan, from, from+5*time.Second) {
			assert.Less(t, s.At, 5*time.Second, "timed from the segment's start")
			s.At += from
			joined = append(joined, s)
		}
	}
	assert.Equal(t, plan, joined)
	empty := Window(plan, 0, time.Second)
	assert.NotNil(t, empty)
	assert.Empty(t, empty)
}

// A pause the end of the run cut short after it had lasted a lease created
// its moment: it landed, and says it was cut short.
func TestAPauseCutShortAfterALeaseLands(t *testing.T) {
	nodes := newNodes(1, 0)
	rec := &recorder{}
	env := baseEnv(&fakeTargets{nodes: []Target{nodes[0]}}, rec)
	env.Lease, env.Pause = 100*time.Millisecond, 5*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l, err := PauseNode(ctx, &env)
	require.NoError(t, err)
	assert.True(t, l.Landed, l.Why)
	assert.Regexp(t, `^redis-0 was stopped, cut short by the end of the run after \S+ of 5s$`, l.Why)
	assert.Equal(t, []syscall.Signal{syscall.SIGSTOP, syscall.SIGCONT}, nodes[0].got(), "the node is continued whatever happens")
}

// Each step of a run whose pause is a distribution draws its own pause
// from it, fixed by the step's seed; a fixed pause stays what it is.
func TestStepDrawsItsPause(t *testing.T) {
	base := Env{Pause: 900 * time.Millisecond, Pauses: workloads.Distribution{Min: 100 * time.Millisecond, Max: 900 * time.Millisecond},
		Record: func(string, history.Value) {}}
	drawn := map[time.Duration]bool{}
	for seed := range uint64(20) {
		env := forStep(base, 1, seed)
		assert.Equal(t, env.Pause, forStep(base, 1, seed).Pause, "the same seed, the same pause")
		assert.GreaterOrEqual(t, env.Pause, 100*time.Millisecond)
		assert.LessOrEqual(t, env.Pause, 900*time.Millisecond)
		drawn[env.Pause] = true
	}
	assert.Greater(t, len(drawn), 10, "steps draw different pauses")
	fixed := base
	fixed.Pauses = workloads.Distribution{}
	assert.Equal(t, 900*time.Millisecond, forStep(fixed, 1, 5).Pause)
}
