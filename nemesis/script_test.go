package nemesis

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/history"
)

// grantingClient is a client whose grants and releases a test sets: the
// nodes of its latest grant, whether it holds the lock, when a release of
// its last deleted nothing.
type grantingClient struct {
	fakeClient
	mu      sync.Mutex
	nodes   []string
	holding bool
	empty   int64
	// invoke and granted are when its latest grant was asked for and
	// given.
	invoke, granted int64
}

func (c *grantingClient) GrantNodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes
}

func (c *grantingClient) EmptyRelease() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.empty
}

func (c *grantingClient) Grant() (invoke, ok int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.invoke, c.granted
}

// grant sets the client holding a lock it asked for at invoke and was
// granted at granted.
func (c *grantingClient) grant(invoke, granted int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding, c.invoke, c.granted = true, invoke, granted
}

// among is a run of nodes with c its one client, holding the lock as c
// says.
func (c *grantingClient) among(nodes []*fakeNode) *fakeTargets {
	targets := &fakeTargets{clients: []Client{c}, holders: func() []Client {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.holding {
			return []Client{c}
		}
		return nil
	}}
	for _, n := range nodes {
		targets.nodes = append(targets.nodes, n)
	}
	return targets
}

func (c *grantingClient) set(holding bool, nodes ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding, c.nodes = holding, nodes
}

// A step waits for the moment it names, as the client reports it: a grant
// on a bare majority with the node among them (not a grant on four nodes,
// not one without the node), a release that deleted nothing.
func TestScriptWaitsForTheMoment(t *testing.T) {
	tests := []struct {
		name    string
		when    Trigger
		happens func(t *testing.T, c *grantingClient, node *fakeNode)
	}{
		{"a grant on a bare majority with the node", Trigger{Client: "c0", Reaches: MomentBareMajority, Node: "redis-4"}, func(t *testing.T, c *grantingClient, node *fakeNode) {
			c.set(true, "redis-0", "redis-1", "redis-2", "redis-4") // four: no bare majority
			time.Sleep(20 * time.Millisecond)
			c.set(true, "redis-0", "redis-1", "redis-2") // without redis-4
			time.Sleep(20 * time.Millisecond)
			c.set(false, "redis-1", "redis-2", "redis-4") // released already
			time.Sleep(20 * time.Millisecond)
			require.Zero(t, node.Clock(), "none of those is the moment")
			c.set(true, "redis-1", "redis-2", "redis-4")
		}},
		{"any client's grant on a bare majority", Trigger{Client: AnyClient, Reaches: MomentBareMajority}, func(t *testing.T, c *grantingClient, node *fakeNode) {
			c.set(false, "redis-1", "redis-2", "redis-4") // released already
			time.Sleep(20 * time.Millisecond)
			require.Zero(t, node.Clock(), "a grant let go is not the moment")
			c.set(true, "redis-0", "redis-2", "redis-3")
		}},
		{"a release that deleted nothing", Trigger{Client: "c0", Reaches: MomentEmptyRelease}, func(_ *testing.T, c *grantingClient, _ *fakeNode) {
			c.mu.Lock()
			c.empty = history.Now()
			c.mu.Unlock()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := newNodes(5, 0)
			c := &grantingClient{fakeClient: fakeClient{fakeTarget: fakeTarget{name: "c0", pid: 1000}}}
			targets := c.among(nodes)
			rec := &recorder{}
			when := tt.when
			start := time.Now()
			done := make(chan error, 1)
			go func() {
				done <- RunScript(context.Background(), []Action{{When: &when, Do: "clock", Target: "redis-4", Offset: 20 * time.Second}}, start, baseEnv(targets, rec))
			}()
			time.Sleep(30 * time.Millisecond)
			_, events := rec.list()
			require.Empty(t, events, "nothing happens before the moment")
			happened := time.Now()
			tt.happens(t, c, nodes[4])
			require.NoError(t, <-done)
			assert.Equal(t, 20*time.Second, nodes[4].Clock(), "the step ran at its moment")
			verbs, _ := rec.list()
			assert.Equal(t, history.NemClockJump, verbs[0])
			assert.Less(t, time.Since(happened), time.Second)
			if when.Reaches == MomentBareMajority {
				assert.Equal(t, []string{"before-lease-check"}, c.parked, "the client is held at its lease check while the step acts")
			}
		})
	}
}

// failingOver is a run whose service failed over at a time a test sets.
type failingOver struct {
	*fakeTargets
	at atomic.Int64
}

func (f *failingOver) LastFailover() int64 { return f.at.Load() }

// A step waiting for a grant during a failover runs once a client holds a
// lock it asked for after the latest switch-master and was granted within
// a lease of it: not on a grant asked for before the switch (the old
// master's), nor one granted more than a lease after it, nor one let go.
func TestScriptWaitsForAGrantDuringAFailover(t *testing.T) {
	const ttl = int64(time.Second) // baseEnv's
	for _, client := range []string{"c0", AnyClient} {
		t.Run(client, func(t *testing.T) {
			nodes := newNodes(3, 0)
			c := &grantingClient{fakeClient: fakeClient{fakeTarget: fakeTarget{name: "c0", pid: 1000}}}
			targets := &failingOver{fakeTargets: c.among(nodes)}
			rec := &recorder{}
			done := make(chan error, 1)
			go func() {
				when := Trigger{Client: client, Reaches: MomentFailoverGrant}
				done <- RunScript(context.Background(), []Action{{When: &when, Do: "pause", Target: "redis-2"}}, time.Now(), baseEnv(targets, rec))
			}()
			now := history.Now()
			c.grant(now-10, now-5) // no failover yet
			time.Sleep(20 * time.Millisecond)
			switched := history.Now()
			targets.at.Store(switched)
			time.Sleep(20 * time.Millisecond) // granted before the switch: the old master's
			c.grant(switched+1, switched+2*ttl)
			time.Sleep(20 * time.Millisecond) // granted two leases after it
			c.grant(switched+1, switched+2)
			c.set(false)
			time.Sleep(20 * time.Millisecond) // let go
			_, events := rec.list()
			require.Empty(t, events, "none of those is the moment")
			happened := time.Now()
			c.grant(switched+1, switched+ttl/2)
			require.NoError(t, <-done)
			verbs, _ := rec.list()
			require.NotEmpty(t, verbs)
			assert.Equal(t, history.NemPause, verbs[0], "the step ran at its moment")
			assert.Less(t, time.Since(happened), time.Second)
		})
	}
}

// leasingClient holds the lock with a lease of its own, as its lock
// reported it.
type leasingClient struct {
	fakeClient
	lease time.Duration
}

func (c *leasingClient) GrantedLease() time.Duration { return c.lease }

// A scripted stop at a client's failpoint is recorded as pause-holder's
// is (the pause names the failpoint, the landing says "stopped at"), and
// is judged by the lease the holder's lock reported, not the run's TTL: a
// stop shorter than that lease did not land.
func TestScriptStopAtAFailpointIsJudgedByTheGrantedLease(t *testing.T) {
	for _, tt := range []struct {
		name   string
		lease  time.Duration
		landed bool
		why    string
	}{
		{"a lease the stop outlives", 20 * time.Millisecond, true, `^c0 was stopped at before-renew for \d+ms$`},
		{"a library's own long lease", time.Minute, false, `^c0's lease was 1m0s, the pause \d+ms$`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &leasingClient{fakeClient: fakeClient{fakeTarget: fakeTarget{name: "c0", pid: 1000}}, lease: tt.lease}
			targets := &fakeTargets{clients: []Client{c}, holders: func() []Client { return []Client{c} }}
			rec := &recorder{}
			script := []Action{{When: &Trigger{Client: "c0", Reaches: "before-renew"}, Do: "pause", Target: "c0", For: 60 * time.Millisecond}}
			require.NoError(t, RunScript(context.Background(), script, time.Now(), baseEnv(targets, rec)))
			verbs, events := rec.list()
			require.Equal(t, []string{history.NemPause, history.NemResume, history.NemLanding}, verbs)
			assert.Equal(t, "before-renew", events[0].Failpoint, "the pause names the failpoint it was aimed at")
			require.NotNil(t, events[2].Landed)
			assert.Equal(t, tt.landed, *events[2].Landed)
			assert.Regexp(t, tt.why, events[2].Detail)
		})
	}
}
