package nemesis

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/lockcheck/lockcheck/backends"
)

// Service handles of the kinds the backends have (Sentinel's leads and
// fails over, PostgreSQL's terminates sessions and promotes a standby):
// each interface a handle implements is a capability.
type (
	leaderHandle   struct{ LeaderFinder }
	failoverHandle struct {
		LeaderFinder
		FailoverService
	}
	sessionsHandle struct{ SessionKiller }
	standbyHandle  struct {
		SessionKiller
		Promoter
	}
)

// TopologyOf is the one rule of which capability comes from what: the
// nodes, their clocks and wiped copies, the network the runtime gives
// them, and the interfaces of the service handle.
func TestTopologyOfDerivesEachCapabilityFromItsSource(t *testing.T) {
	node := func(name string) backends.NodeSpec { return backends.NodeSpec{Name: name} }
	clock := func(name string) backends.NodeSpec { return backends.NodeSpec{Name: name, FakeClock: true} }
	copies := func(name string) backends.NodeSpec { return backends.NodeSpec{Name: name, WipedCopiesPeer: true} }
	three := []backends.NodeSpec{node("a"), node("b"), node("c")}
	for _, tt := range []struct {
		name  string
		facts Facts
		want  []Capability
	}{
		{"a service already running has no node to offer", Facts{Service: reflect.TypeFor[leaderHandle]()}, nil},
		{"one node", Facts{Nodes: three[:1]}, []Capability{CapNodes, CapRestart, CapWipe}},
		{"three nodes", Facts{Nodes: three}, []Capability{CapNodes, CapRestart, CapWipe, CapMajority}},
		{"some clocks faked", Facts{Nodes: []backends.NodeSpec{clock("a"), node("b")}}, []Capability{CapNodes, CapRestart, CapWipe, CapClock}},
		{"every clock faked", Facts{Nodes: []backends.NodeSpec{clock("a"), clock("b"), clock("c")}}, []Capability{CapNodes, CapRestart, CapWipe, CapClock, CapAllClocks, CapMajority}},
		{"a wiped node copies its peer", Facts{Nodes: []backends.NodeSpec{copies("a"), copies("b")}}, []Capability{CapNodes, CapRestart}},
		{"a lone node that would copy a peer", Facts{Nodes: []backends.NodeSpec{copies("a")}}, []Capability{CapNodes, CapRestart, CapWipe}},
		{"a network of the run's own", Facts{Nodes: three[:1], OwnNetwork: true}, []Capability{CapNodes, CapRestart, CapWipe, CapPartition}},
		{"proxies", Facts{Nodes: three[:1], Proxied: true}, []Capability{CapNodes, CapRestart, CapWipe, CapPartition, CapLinks, CapShape}},
		{"nodes that cut their links", Facts{Nodes: three[:1], OwnNetwork: true, NodesCutLinks: true}, []Capability{CapNodes, CapRestart, CapWipe, CapPartition, CapLinks, CapShape}},
		{"a leader", Facts{Nodes: three, Service: reflect.TypeFor[leaderHandle]()}, []Capability{CapNodes, CapRestart, CapWipe, CapMajority, CapLeader}},
		{"a failover", Facts{Nodes: three, Service: reflect.TypeFor[failoverHandle]()}, []Capability{CapNodes, CapRestart, CapWipe, CapMajority, CapLeader, CapFailover}},
		{"sessions", Facts{Nodes: three[:1], Service: reflect.TypeFor[sessionsHandle]()}, []Capability{CapNodes, CapRestart, CapWipe, CapSessions}},
		{"a standby", Facts{Nodes: three[:2], Service: reflect.TypeFor[standbyHandle]()}, []Capability{CapNodes, CapRestart, CapWipe, CapSessions, CapPromote}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.facts.Backend, tt.facts.Runtime = "x", "process"
			top := TopologyOf(tt.facts)
			assert.ElementsMatch(t, tt.want, top.Offers)
			assert.Equal(t, len(tt.facts.Nodes), top.Nodes)
		})
	}
}
