package container

import (
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The links of a run's network can be cut one by one: every node drops,
// in its own network namespace, the packets from and to the addresses it
// is cut from (iptables through nsenter), and each client dials from an
// address of its own on the run's network (a further address of the
// host's end of the bridge), so that a node tells clients apart. A node
// slows a link by holding its packets (delayqueue.go) and makes it flaky
// by resetting its connections, with rules of the same kind. All go with
// the run: the rules with the containers, the addresses with the
// network's bridge.

// clientAddrBase is where clients' addresses start on the run's /24: the
// nodes take the addresses after the gateway.
const clientAddrBase = 150

// ClientAddr gives the slot-th client an address of its own on the node's
// network, from which its connections to the nodes come.
func (n *Node) ClientAddr(slot int) (string, error) { return n.rt.clientAddr(slot) }

func (r *Runtime) clientAddr(slot int) (string, error) {
	if slot >= 254-clientAddrBase {
		return "", fmt.Errorf("client %d: the run's network has addresses for %d clients", slot, 254-clientAddrBase)
	}
	addr := r.subnet.Addr()
	for i := 0; i < clientAddrBase+slot; i++ {
		addr = addr.Next()
	}
	// A network Docker created without a bridge name of its own has its
	// host end at br- and the first 12 digits of its ID.
	bridge := "br-" + r.net.ID[:12]
	out, err := exec.Command("ip", "addr", "add", netip.PrefixFrom(addr, 32).String(), "dev", bridge).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "File exists") {
		return "", fmt.Errorf("giving client %d the address %s on %s: %s", slot, addr, bridge, strings.TrimSpace(string(out)))
	}
	return addr.String(), nil
}

// Cut makes the node drop every packet from and to addr.
func (n *Node) Cut(addr string) error { return n.drop("-I", addr) }

// Uncut takes out the rules Cut put in.
func (n *Node) Uncut(addr string) error { return n.drop("-D", addr) }

func (n *Node) drop(op, addr string) error {
	for _, rule := range [][]string{{"INPUT", "-s", addr}, {"OUTPUT", "-d", addr}} {
		if err := n.nsIptables(op, rule[0], rule[1], rule[2], "-j", "DROP"); err != nil {
			return err
		}
	}
	return nil
}

// shaping is what a node's slow and flaky links put in its network
// namespace.
type shaping struct {
	mu sync.Mutex
	// pid is the node's process when the rules went in: a container
	// started again has a new namespace, without them.
	pid   int
	queue *delayQueue
	slow  map[string]bool   // address -> its packets go through the queue
	flaky map[string]string // address -> the chain that resets its connections
	// rounds counts the flaky chains made, which name them and their
	// connection marks.
	rounds int
}

// shapingNow locks the node's shaping for a change, first forgetting
// what went with an earlier namespace.
func (n *Node) shapingNow() *shaping {
	s := &n.shape
	s.mu.Lock()
	if pid := n.PID(); s.pid != pid {
		if s.queue != nil {
			s.queue.close()
		}
		s.pid, s.queue, s.slow, s.flaky = pid, nil, map[string]bool{}, map[string]string{}
	}
	return s
}

// closeShaping lets every packet the node's queue holds go and unbinds
// it; the rules go with the container.
func (n *Node) closeShaping() {
	n.shape.mu.Lock()
	defer n.shape.mu.Unlock()
	if n.shape.queue != nil {
		n.shape.queue.close()
		n.shape.queue = nil
	}
}

// Slow delays every packet from and to addr by latency plus up to jitter
// (a delayQueue in lockcheck holds them); zero latency and jitter take the
// delay out. The node shapes both ways of the link: a client on the host
// has no namespace of its own to shape its half in.
func (n *Node) Slow(addr string, latency, jitter time.Duration) error {
	peer, err := netip.ParseAddr(addr)
	if err != nil {
		return fmt.Errorf("%s: slowing the link to %q: %w", n.Name(), addr, err)
	}
	d := delay{latency: latency, jitter: jitter}
	on := d != (delay{})
	s := n.shapingNow()
	defer s.mu.Unlock()
	if on && s.queue == nil {
		if s.queue, err = openDelayQueue(s.pid); err != nil {
			return fmt.Errorf("%s: %w", n.Name(), err)
		}
	}
	if on != s.slow[addr] {
		op := "-D"
		if on {
			op = "-I"
		}
		queue := []string{"-j", "NFQUEUE", "--queue-num", strconv.Itoa(delayQueueNum), "--queue-bypass"}
		for _, rule := range [][]string{{"INPUT", "-s", addr}, {"OUTPUT", "-d", addr}} {
			err = errors.Join(err, n.nsIptables(op, rule[0], append(rule[1:], queue...)...))
		}
		s.slow[addr] = on
	}
	// The queue learns the delay after the rules changed: until then a
	// packet of the peer passes at once, and a packet held when the link
	// heals goes at its time (or at once, when the queue closes).
	if s.queue != nil && !s.queue.set(peer, d) {
		s.queue.close()
		s.queue = nil
	}
	return err
}

// Flaky resets share of the TCP connections from and to addr, those open
// and every new one, each decided once; share 0 lets them all be again.
// A connection picked is reset both ways at its next packet: REJECT
// answers the peer's packets with a reset and turns the node's own into
// one for the node's socket. The decision is a mark on the connection in
// the node's connection tracking, a new one at every Flaky, so that a
// connection spared by one fault may be reset by the next.
func (n *Node) Flaky(addr string, share float64) error {
	s := n.shapingNow()
	defer s.mu.Unlock()
	jumps := func(op, chain string) error {
		var err error
		for _, rule := range [][]string{{"INPUT", "-s", addr}, {"OUTPUT", "-d", addr}} {
			err = errors.Join(err, n.nsIptables(op, rule[0], append(rule[1:], "-p", "tcp", "-j", chain)...))
		}
		return err
	}
	if chain, ok := s.flaky[addr]; ok {
		// Out with the old decisions, whatever comes next.
		err := errors.Join(jumps("-D", chain), n.nsIptables("-F", chain), n.nsIptables("-X", chain))
		delete(s.flaky, addr)
		if share == 0 {
			return err
		}
	}
	if share == 0 {
		return nil
	}
	s.rounds++
	chain := "lockcheck-flaky-" + strconv.Itoa(s.rounds)
	reset, spared := strconv.Itoa(2*s.rounds+1)+"/0xffff", strconv.Itoa(2*s.rounds+2)+"/0xffff"
	rules := [][]string{
		// Resets pass: REJECT's own, and the peer's.
		{"-p", "tcp", "--tcp-flags", "RST", "RST", "-j", "RETURN"},
		{"-m", "connmark", "--mark", spared, "-j", "RETURN"},
		{"-m", "connmark", "!", "--mark", reset, "-m", "statistic", "--mode", "random", "--probability", strconv.FormatFloat(share, 'f', 4, 64), "-j", "CONNMARK", "--set-xmark", reset},
		{"-m", "connmark", "!", "--mark", reset, "-j", "CONNMARK", "--set-xmark", spared},
		{"-p", "tcp", "-m", "connmark", "--mark", reset, "-j", "REJECT", "--reject-with", "tcp-reset"},
	}
	if err := n.nsIptables("-N", chain); err != nil {
		return err
	}
	for _, r := range rules {
		if err := n.nsIptables("-A", chain, r...); err != nil {
			return errors.Join(err, n.nsIptables("-F", chain), n.nsIptables("-X", chain))
		}
	}
	if err := jumps("-I", chain); err != nil {
		return errors.Join(err, jumps("-D", chain), n.nsIptables("-F", chain), n.nsIptables("-X", chain))
	}
	s.flaky[addr] = chain
	return nil
}

// nsIptables runs iptables op on chain in the node's network namespace.
func (n *Node) nsIptables(op, chain string, rule ...string) error {
	args := append([]string{"-t", strconv.Itoa(n.PID()), "-n", "iptables", op, chain}, rule...)
	if out, err := exec.Command("nsenter", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: iptables %s %s %s: %s", n.Name(), op, chain, strings.Join(rule, " "), strings.TrimSpace(string(out)))
	}
	return nil
}
