package nemesis

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/history"
)

// fakeNetwork notes which links are in which state.
type fakeNetwork struct {
	mu    sync.Mutex
	rules map[[2]string]LinkRule
	// peak is the number of links shaped at once at most.
	peak int
}

func (n *fakeNetwork) Shape(as, bs []Target, rule LinkRule) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.rules == nil {
		n.rules = map[[2]string]LinkRule{}
	}
	for _, a := range as {
		for _, b := range bs {
			link := [2]string{min(a.Name(), b.Name()), max(a.Name(), b.Name())}
			if rule == (LinkRule{}) {
				delete(n.rules, link)
			} else {
				n.rules[link] = rule
			}
		}
	}
	n.peak = max(n.peak, len(n.rules))
	return nil
}

// The network faults shape the links their doc says, record them, and
// leave every link healed; each lands when the shape held for the pause.
func TestNetworkFaultsShapeAndHeal(t *testing.T) {
	tests := []struct {
		fault string
		// links is how many links the fault shapes at once, on 5 nodes and
		// 4 clients (9 targets).
		links  int
		verb   string
		events int // start events recorded
	}{
		// A node cut from the 4 other nodes and the 4 clients.
		{"partition", 8, history.NemPartition, 1},
		// A node and 1 client (a minority of 4) against 4 nodes and 3
		// clients.
		{"partition-minority", 2 * 7, history.NemPartition, 2},
		// 2 nodes and 2 clients (the same share) against 3 and 2; every
		// target of both halves is recorded.
		{"partition-halves", 4 * 5, history.NemPartition, 9},
		// A bridge; halves of 2 nodes with 2 clients each: 4 x 4.
		{"partition-bridge", 4 * 4, history.NemPartition, 8},
		// A client's links to every node (no master or leader).
		{"slow-link", 5, history.NemSlowLink, 1},
		{"flaky-link", 5, history.NemFlakyLink, 1},
	}
	for _, tt := range tests {
		t.Run(tt.fault, func(t *testing.T) {
			var nodes []Target
			for _, n := range newNodes(5, 0) {
				nodes = append(nodes, n)
			}
			var clients []Client
			for _, c := range newClients(4) {
				clients = append(clients, c)
			}
			rec := &recorder{}
			net := &fakeNetwork{}
			env := baseEnv(&fakeTargets{nodes: nodes, clients: clients, holders: func() []Client { return nil }}, rec)
			env.Network = net
			env.Settings, _ = ParseSettings(nil)
			f, ok := Lookup(tt.fault)
			require.True(t, ok)
			l, err := f.Inject(context.Background(), &env)
			require.NoError(t, err)
			assert.True(t, l.Landed, l.Why)
			assert.Equal(t, tt.links, net.peak, "links shaped at once")
			assert.Empty(t, net.rules, "every link healed")
			verbs, values := rec.list()
			starts := 0
			for i, v := range verbs {
				if v == tt.verb {
					starts++
					assert.NotEmpty(t, values[i].Links, "the event names the other ends")
					assert.NotContains(t, values[i].Links, values[i].Target)
				}
			}
			assert.Equal(t, tt.events, starts)
			heals := slices.DeleteFunc(slices.Clone(verbs), func(v string) bool { return v == tt.verb })
			assert.Len(t, heals, starts, "one end per start")
		})
	}
}

// A fault that cuts single links refuses a run that cannot cut them, and
// one that slows or breaks them a run that can only cut them.
func TestLinkFaultsNeedTheNetwork(t *testing.T) {
	noLinks := []Capability{CapNodes, CapMajority, CapPartition}
	cutsOnly := append(slices.Clone(noLinks), CapLinks)
	for _, tt := range []struct {
		fault  string
		offers []Capability
		need   Capability
	}{
		{"partition-minority", noLinks, CapLinks},
		{"partition-halves", noLinks, CapLinks},
		{"partition-bridge", noLinks, CapLinks},
		{"partition-minority", cutsOnly, ""},
		{"slow-link", cutsOnly, CapShape},
		{"flaky-link", cutsOnly, CapShape},
	} {
		err := Validate([]string{tt.fault}, nil, Topology{Backend: "redis", Runtime: "docker", Nodes: 5, Offers: tt.offers})
		if tt.need == "" {
			assert.NoError(t, err, tt.fault)
			continue
		}
		var missing *UnavailableError
		require.ErrorAs(t, err, &missing, tt.fault)
		assert.Equal(t, tt.need, missing.Need, tt.fault)
	}
}
