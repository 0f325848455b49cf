package container

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
)

// The links of a run's network can be cut one by one: every node drops,
// in its own network namespace, the packets from and to the addresses it
// is cut from (iptables through nsenter), and each client dials from an
// address of its own on the run's network (a further address of the
// host's end of the bridge), so that a node tells clients apart. Both go
// with the run: the rules with the containers, the addresses with the
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
func (n *Node) Cut(addr string) error { return n.iptables("-I", addr) }

// Uncut takes out the rules Cut put in.
func (n *Node) Uncut(addr string) error { return n.iptables("-D", addr) }

func (n *Node) iptables(op, addr string) error {
	pid := strconv.Itoa(n.PID())
	for _, rule := range [][]string{{"INPUT", "-s", addr}, {"OUTPUT", "-d", addr}} {
		args := append([]string{"-t", pid, "-n", "iptables", op, rule[0]}, append(rule[1:], "-j", "DROP")...)
		if out, err := exec.Command("nsenter", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: iptables %s %s: %s", n.Name(), op, strings.Join(rule, " "), strings.TrimSpace(string(out)))
		}
	}
	return nil
}
