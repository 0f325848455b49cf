package harness

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/harness/netproxy"
	"github.com/lockcheck/lockcheck/nemesis"
)

// ParamNetwork is the run param that says how the process runtime's nodes
// and clients reach each other: NetworkProxy through lockcheck's proxies
// (harness/netproxy), where links can be cut, slowed and broken, or
// NetworkDirect on loopback. Unset, a run proxies when one of its faults
// needs links (partition, slow-link, ...).
const ParamNetwork = "network"

// The values of ParamNetwork.
const (
	NetworkProxy  = "proxy"
	NetworkDirect = "direct"
)

// networkOf says how the run's nodes (specs) and clients reach each
// other; the docker runtime has a network of its own, and nodes that
// cannot run behind proxies are reached directly.
func networkOf(cfg Config, specs []backends.NodeSpec) string {
	if runtimeOf(cfg) != RuntimeProcess || len(specs) == 0 || !proxyable(specs) {
		return NetworkDirect
	}
	if n := cfg.Run.Params[ParamNetwork]; n != "" {
		return n
	}
	if linksNeeded(cfg) {
		return NetworkProxy
	}
	return NetworkDirect
}

// linksNeeded says whether one of the run's faults or script steps cuts
// or shapes single links.
func linksNeeded(cfg Config) bool {
	for _, a := range cfg.Script {
		if slices.Contains(a.Needs(), nemesis.CapLinks) {
			return true
		}
	}
	for _, name := range faultNames(cfg) {
		f, _ := nemesis.Lookup(name)
		for _, need := range f.Needs {
			if need == nemesis.CapPartition || need == nemesis.CapLinks || need == nemesis.CapShape {
				return true
			}
		}
	}
	return false
}

// checkProgramLinks refuses a network fault that could not reach a lock
// client program's own connections: on a service that hands its clients
// addresses of its own (catalog.Backend.Announces), the program dials
// those past its slot's relays (programlinks.go), and a cut of its links
// would be reported with nothing cut.
func checkProgramLinks(cfg Config, b catalog.Backend) error {
	if b.Client == nil || !b.Announces || !linksNeeded(cfg) {
		return nil
	}
	return fmt.Errorf("network faults with --client on --topology %s: %s hands a program addresses of its own (the master's), which it dials past its slot's links, so a cut or slowed link would not reach its connections; run them with lockcheck's own client (--backend %s) or the program on --topology redis", b.Topology(), b.Topology(), b.Topology())
}

func proxyable(specs []backends.NodeSpec) bool {
	for _, s := range specs {
		if !s.Proxyable {
			return false
		}
	}
	return true
}

// checkNetwork refuses --network proxy for nodes that cannot run behind
// the proxies.
func checkNetwork(cfg Config, specs []backends.NodeSpec) error {
	if cfg.Run.Params[ParamNetwork] != NetworkProxy || runtimeOf(cfg) != RuntimeProcess || len(specs) == 0 || proxyable(specs) {
		return nil
	}
	return fmt.Errorf("--%s %s: the %s nodes cannot run behind lockcheck's proxies; use --%s %s or --runtime docker", ParamNetwork, NetworkProxy, cfg.Run.Backend, ParamNetwork, NetworkDirect)
}

// nodeSource is the loopback address the i-th node's connections come
// from, and clientSource the slot-th client's: how the proxies tell the
// callers apart. lockcheck's own connections (readiness, the service
// handle, the end-of-run inspection) come from 127.0.0.1 and belong to no
// link.
func nodeSource(i int) string { return "127.0.1." + strconv.Itoa(i+1) }

func clientSource(slot int) string {
	return fmt.Sprintf("127.1.%d.%d", slot/250, slot%250+1)
}

// clientLink is the name of a client's links: c and its slot, the name of
// its first process, whatever process runs in the slot now.
func clientLink(slot int) string { return "c" + strconv.Itoa(slot) }

// proxyNodes puts a proxy in front of every port of every node: each node
// listens on ports of its own (Endpoint.Listen) while everyone, the node's
// peers included, reaches it at Ports, and its own connections come from
// its source address.
func proxyNodes(network *netproxy.Network, specs []backends.NodeSpec, eps []backends.Endpoint) error {
	for i := range eps {
		eps[i].Source = nodeSource(i)
		network.Name(eps[i].Source, eps[i].Name)
		for range eps[i].Ports {
			p, err := freePort()
			if err != nil {
				return err
			}
			eps[i].Listen = append(eps[i].Listen, p)
		}
	}
	for i, e := range eps {
		var (
			caller  netproxy.Caller
			rewrite netproxy.Rewrite
		)
		if specs[i].Caller != nil {
			caller = specs[i].Caller(eps)
		}
		if specs[i].Rewrite != nil {
			rewrite = specs[i].Rewrite(eps)
		}
		for j, port := range e.Ports {
			listen := net.JoinHostPort(e.HostName(), strconv.Itoa(port))
			upstream := net.JoinHostPort(e.BindAddr(), strconv.Itoa(e.Listen[j]))
			if err := network.Proxy(e.Name, listen, upstream, caller, rewrite); err != nil {
				return fmt.Errorf("%w: %w", err, errPortInUse)
			}
		}
	}
	return nil
}

// links cuts or shapes single links between the run's nodes and clients,
// named as the proxies name them (linkName).
type links interface {
	shape(a, b string, rule nemesis.LinkRule) error
	// source is the address the slot-th client's connections come from.
	source(slot int) (string, error)
}

// linkNetwork is the nemesis's view of the run's links.
type linkNetwork struct{ links links }

// Shape implements nemesis.Network.
func (n linkNetwork) Shape(as, bs []nemesis.Target, rule nemesis.LinkRule) error {
	var err error
	for _, a := range as {
		for _, b := range bs {
			err = errors.Join(err, n.links.shape(linkName(a), linkName(b), rule))
		}
	}
	return err
}

// linkName is the name the run's links know a target by.
func linkName(t nemesis.Target) string {
	if w, ok := t.(*worker); ok {
		return clientLink(w.slot)
	}
	return t.Name()
}

// proxyLinks are the process runtime's links: its proxies.
type proxyLinks struct{ network *netproxy.Network }

func (p *proxyLinks) shape(a, b string, rule nemesis.LinkRule) error {
	p.network.Set(a, b, netproxy.Rule{Cut: rule.Cut, Latency: rule.Latency, Jitter: rule.Jitter, Reset: rule.Reset})
	return nil
}

func (p *proxyLinks) source(slot int) (string, error) {
	ip := clientSource(slot)
	p.network.Name(ip, clientLink(slot))
	return ip, nil
}

// linkCutter is a container whose links can be cut one by one (package
// container's Node): it drops, in its own network namespace, the packets
// from and to an address, and gives clients addresses of their own on its
// network. It can also slow the packets of an address or reset its
// connections; zero values undo that.
type linkCutter interface {
	Cut(addr string) error
	Uncut(addr string) error
	Slow(addr string, latency, jitter time.Duration) error
	Flaky(addr string, share float64) error
	ClientAddr(slot int) (string, error)
}

// linkTools are the host programs a linkCutter runs.
var linkTools = []string{"ip", "nsenter", "iptables"}

// checkLinkTools says whether this host can cut single links between
// containers: as root, with linkTools on PATH.
func checkLinkTools() error {
	if os.Geteuid() != 0 {
		return errors.New("cutting single links between containers needs root (iptables in each node's network namespace)")
	}
	for _, tool := range linkTools {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("cutting single links between containers needs %s: %v (apt-get install iproute2 util-linux iptables)", tool, err)
		}
	}
	return nil
}

// containerLinks are the docker runtime's links: each node drops the
// packets of the addresses it is cut from, and each client dials from an
// address of its own on the run's network. A link is slowed or made flaky
// by one of its ends, both ways: the node, or the first of two nodes.
type containerLinks struct {
	mu    sync.Mutex
	nodes map[string]linkCutter
	addrs map[string]string  // link name -> address on the run's network
	cut   map[[2]string]bool // node, address it drops
	// shaped is how a node shapes an address's packets (Cut unused).
	shaped map[[2]string]nemesis.LinkRule
}

func newContainerLinks(nodes []Container) (*containerLinks, error) {
	l := &containerLinks{nodes: map[string]linkCutter{}, addrs: map[string]string{}, cut: map[[2]string]bool{}, shaped: map[[2]string]nemesis.LinkRule{}}
	for _, n := range nodes {
		c, ok := n.(linkCutter)
		if !ok {
			return nil, fmt.Errorf("%s: the docker runtime cannot cut its links one by one", n.Name())
		}
		l.nodes[n.Name()] = c
		l.addrs[n.Name()] = n.Endpoint().HostName()
	}
	return l, nil
}

func (l *containerLinks) source(slot int) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// A slot keeps its address: a worker started again in it, and the
	// relays of its lock client program (programlinks.go), ask again, and
	// the address is assigned on the network once.
	if ip, ok := l.addrs[clientLink(slot)]; ok {
		return ip, nil
	}
	for _, n := range l.nodes {
		ip, err := n.ClientAddr(slot)
		if err != nil {
			return "", err
		}
		l.addrs[clientLink(slot)] = ip
		return ip, nil
	}
	return "", errors.New("the run has no node")
}

func (l *containerLinks) shape(a, b string, rule nemesis.LinkRule) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var err error
	for _, end := range [][2]string{{a, b}, {b, a}} {
		n, ok := l.nodes[end[0]]
		addr := l.addrs[end[1]]
		key := [2]string{end[0], addr}
		if !ok || addr == "" || l.cut[key] == rule.Cut {
			continue
		}
		if rule.Cut {
			err = errors.Join(err, n.Cut(addr))
		} else {
			err = errors.Join(err, n.Uncut(addr))
		}
		l.cut[key] = rule.Cut
	}
	// One end shapes the link both ways: a node shaping its packets from
	// and to the other as well would slow them twice.
	if _, ok := l.nodes[a]; !ok {
		a, b = b, a
	}
	n, ok := l.nodes[a]
	addr := l.addrs[b]
	if !ok || addr == "" {
		return err
	}
	key := [2]string{a, addr}
	was, now := l.shaped[key], nemesis.LinkRule{Latency: rule.Latency, Jitter: rule.Jitter, Reset: rule.Reset}
	if was.Latency != now.Latency || was.Jitter != now.Jitter {
		err = errors.Join(err, n.Slow(addr, now.Latency, now.Jitter))
	}
	if was.Reset != now.Reset {
		err = errors.Join(err, n.Flaky(addr, now.Reset))
	}
	if now == (nemesis.LinkRule{}) {
		delete(l.shaped, key)
	} else {
		l.shaped[key] = now
	}
	return err
}
