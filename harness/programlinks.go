package harness

import (
	"fmt"
	"net"
	"sync"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/harness/netproxy"
)

// programLinks gives each slot's lock client program links of its own. A
// program in any language dials the servers from wherever its system
// picks, so the proxies (or a container's packet rules) could not tell its
// connections from lockcheck's own, and a fault aimed at its links would
// cut nothing. Instead each slot's program is handed addresses that lead
// through relays of the slot (netproxy.Relay) which dial every node from
// the slot's source address, as lockcheck's own clients do: a partition, a
// slow or a flaky link then acts on the program's own connections.
//
// A program started again in its slot (kill-client) gets the same
// addresses: its links are the slot's, whatever process runs in it.
type programLinks struct {
	links links

	mu     sync.Mutex
	slots  map[int][]backends.Endpoint
	relays []*netproxy.Relay
}

func newProgramLinks(l links) *programLinks {
	return &programLinks{links: l, slots: map[int][]backends.Endpoint{}}
}

// endpoints are the nodes as slot's program reaches them: every port of
// every node of eps at a relay of the slot's own on loopback.
func (p *programLinks) endpoints(slot int, eps []backends.Endpoint) ([]backends.Endpoint, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if out, ok := p.slots[slot]; ok {
		return out, nil
	}
	source, err := p.links.source(slot)
	if err != nil {
		return nil, err
	}
	out := make([]backends.Endpoint, len(eps))
	for i, e := range eps {
		relayed := backends.Endpoint{Name: e.Name, Host: backends.Loopback, Bind: backends.Loopback, Dir: e.Dir}
		for j := range e.Ports {
			r, err := netproxy.NewRelay(net.JoinHostPort(backends.Loopback, "0"), e.AddrOf(j), source)
			if err != nil {
				return nil, fmt.Errorf("a relay for c%d to %s: %w", slot, e.AddrOf(j), err)
			}
			p.relays = append(p.relays, r)
			relayed.Ports = append(relayed.Ports, r.Port())
		}
		out[i] = relayed
	}
	p.slots[slot] = out
	return out, nil
}

// close closes every relay and the connections they carry.
func (p *programLinks) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.relays {
		r.Close() //nolint:errcheck // closing listeners of a run that ends
	}
	p.relays = nil
}
