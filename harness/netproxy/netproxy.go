// Package netproxy is the process runtime's network: one TCP proxy in
// front of every port of every node, through which clients and the other
// nodes reach it. Each caller dials from a loopback address of its own
// (127.x.y.z), so a proxy knows which link a connection belongs to, and a
// link (a pair of names) can be cut, slowed or made to reset connections
// while everything else passes untouched.
//
// A proxy per destination that tells its callers apart by their source
// address is what makes every path coverable: a Sentinel hands clients and
// replicas the one address a master announces, and etcd members all dial a
// peer at the one URL the cluster agreed on, so proxies per (caller,
// destination) pair, as toxiproxy has them, could not be told apart by
// address. toxiproxy's toxics apply to all connections of a proxy; the
// three link states needed here (cut, latency with jitter, reset) are a
// few lines each, with nothing to run beside lockcheck.
package netproxy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Rule is the state of a link; the zero Rule passes everything at once.
type Rule struct {
	// Cut stalls the link's connections (nothing passes either way) and
	// holds new ones unanswered: a partition drops packets, it does not
	// refuse connections. When the cut heals, the stalled connections are
	// closed, as TCP gives up on a peer silent that long, and callers
	// connect again.
	Cut bool
	// Latency, plus up to Jitter more, delays every chunk either way.
	Latency, Jitter time.Duration
	// Reset is the share (0 to 1) of the link's connections reset: of
	// those open when the rule is set, and of every new one.
	Reset float64
}

func (r Rule) zero() bool { return r == Rule{} }

type pair struct{ a, b string }

func pairOf(a, b string) pair {
	if b < a {
		a, b = b, a
	}
	return pair{a, b}
}

// Network holds the proxies and the state of every link. Its methods are
// safe for concurrent use.
type Network struct {
	mu        sync.Mutex
	names     map[string]string // source IP -> the caller's name
	rules     map[pair]Rule
	listeners []net.Listener
	conns     map[*conn]struct{}
	closed    bool
	wg        sync.WaitGroup
}

// New is a network with no proxies.
func New() *Network {
	return &Network{names: map[string]string{}, rules: map[pair]Rule{}, conns: map[*conn]struct{}{}}
}

// Name says that connections from ip come from name. A connection from an
// address no one was named for (lockcheck's own checks from 127.0.0.1)
// belongs to no link and always passes.
func (n *Network) Name(ip, name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.names[ip] = name
}

// Caller names who opened a connection from the first bytes it sent, or
// says "" when they do not tell: for callers whose connections cannot come
// from an address of their own (etcd members name themselves in every
// request to a peer).
type Caller func(head []byte) string

// Rewrite changes what a caller sent first before it goes on to the node:
// for callers that name, in their first message, an address of their own
// that the node would call back past the proxies (a ZooKeeper server names
// the address it listens on itself). It returns head when it has nothing
// to change.
type Rewrite func(head []byte) []byte

// Proxy listens on listen and forwards every connection to upstream; owner
// names the node behind it, the other end of every link it carries. caller,
// if set, names the callers whose address was named for no one, and
// rewrite, if set, rewrites their first bytes.
func (n *Network) Proxy(owner, listen, upstream string, caller Caller, rewrite Rewrite) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("proxy for %s on %s: %w", owner, listen, err)
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		ln.Close()
		return errors.New("the network is closed")
	}
	n.listeners = append(n.listeners, ln)
	n.wg.Add(1)
	n.mu.Unlock()
	go n.accept(ln, owner, upstream, caller, rewrite)
	return nil
}

// Set puts the link between a and b (either way) in state r, applying it
// to the connections already open.
func (n *Network) Set(a, b string, r Rule) {
	p := pairOf(a, b)
	n.mu.Lock()
	defer n.mu.Unlock()
	if r.zero() {
		delete(n.rules, p)
	} else {
		n.rules[p] = r
	}
	for c := range n.conns {
		if c.link != p {
			continue
		}
		switch {
		case r.Cut:
			c.stall()
		case c.stalled():
			// The cut healed: its connections are dead to both ends.
			go c.close()
		case r.Reset > 0 && rand.Float64() < r.Reset:
			go c.reset()
		}
	}
}

// Heal puts every link back to passing everything.
func (n *Network) Heal() {
	n.mu.Lock()
	var links []pair
	for p := range n.rules {
		links = append(links, p)
	}
	n.mu.Unlock()
	for _, p := range links {
		n.Set(p.a, p.b, Rule{})
	}
}

// Conns counts the connections the proxies carry, for tests.
func (n *Network) Conns() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.conns)
}

// Close stops every proxy and closes every connection through them, and
// returns once nothing of them runs.
func (n *Network) Close() error {
	n.mu.Lock()
	n.closed = true
	lns := n.listeners
	n.listeners = nil
	conns := make([]*conn, 0, len(n.conns))
	for c := range n.conns {
		conns = append(conns, c)
	}
	n.mu.Unlock()
	var err error
	for _, ln := range lns {
		err = errors.Join(err, ln.Close())
	}
	for _, c := range conns {
		c.close()
	}
	n.wg.Wait()
	return err
}

func (n *Network) accept(ln net.Listener, owner, upstream string, caller Caller, rewrite Rewrite) {
	defer n.wg.Done()
	for {
		down, err := ln.Accept()
		if err != nil {
			return // closed
		}
		n.mu.Lock()
		from := n.names[hostOf(down.RemoteAddr())]
		c := &conn{down: down, halt: make(chan struct{}), done: make(chan struct{})}
		if from != "" {
			c.link = pairOf(from, owner)
		}
		if n.closed {
			n.mu.Unlock()
			down.Close()
			return
		}
		n.conns[c] = struct{}{}
		n.wg.Add(1)
		n.mu.Unlock()
		go n.serve(c, owner, upstream, caller, rewrite)
	}
}

// sniffWait bounds the wait for a caller's first bytes; a caller that
// waits for the node to speak first stays unnamed.
const sniffWait = 500 * time.Millisecond

// serve carries one connection until either end closes it or the network
// shuts down.
func (n *Network) serve(c *conn, owner, upstream string, caller Caller, rewrite Rewrite) {
	defer n.wg.Done()
	defer func() {
		c.close()
		n.mu.Lock()
		delete(n.conns, c)
		n.mu.Unlock()
	}()
	n.mu.Lock()
	unnamed := c.link == pair{}
	n.mu.Unlock()
	var head []byte
	if unnamed && caller != nil {
		head = c.sniff()
		if name := caller(head); name != "" {
			n.mu.Lock()
			c.link = pairOf(name, owner)
			n.mu.Unlock()
		}
		if rewrite != nil {
			head = rewrite(head)
		}
	}
	n.mu.Lock()
	r := n.rules[c.link]
	n.mu.Unlock()
	switch {
	case r.Cut:
		// Held unanswered: the caller times out as across a partition.
		c.stall()
		<-c.done
		return
	case r.Reset > 0 && rand.Float64() < r.Reset:
		c.reset()
		return
	}
	up, err := net.DialTimeout("tcp", upstream, 5*time.Second)
	if err != nil {
		return // the node is down: the caller sees its connection close
	}
	c.mu.Lock()
	c.up = up
	closed := c.isClosed
	c.mu.Unlock()
	if closed {
		up.Close()
		return
	}
	if len(head) > 0 && (!n.pass(c) || write(up, head) != nil) {
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); n.pump(c, up, c.down) }()
	go func() { defer wg.Done(); n.pump(c, c.down, up) }()
	wg.Wait()
}

// pump copies src to dst chunk by chunk, each under the link's rule of the
// moment, and closes the connection when src ends.
func (n *Network) pump(c *conn, dst, src net.Conn) {
	defer c.close()
	buf := make([]byte, 32<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			if !n.pass(c) {
				<-c.done
				return
			}
			if werr := write(dst, buf[:k]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pass waits out the link's latency and reports whether the chunk may go:
// not on a stalled connection, whose data is lost as across a partition.
func (n *Network) pass(c *conn) bool {
	if c.stalled() {
		return false
	}
	n.mu.Lock()
	r := n.rules[c.link]
	n.mu.Unlock()
	if d := r.Latency + jitter(r.Jitter); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.halt:
		case <-c.done:
			return false
		}
	}
	return !c.stalled()
}

func write(dst net.Conn, b []byte) error {
	_, err := dst.Write(b)
	return err
}

func jitter(j time.Duration) time.Duration {
	if j <= 0 {
		return 0
	}
	return rand.N(j)
}

func hostOf(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	host, _, _ := net.SplitHostPort(a.String())
	return host
}

// conn is one connection through a proxy: down is the caller's side, up
// the node's.
type conn struct {
	link pair // zero for a caller of no link
	down net.Conn

	mu       sync.Mutex
	up       net.Conn
	halted   bool
	isClosed bool
	halt     chan struct{} // closed when the connection stalls
	done     chan struct{} // closed when it is closed
}

// sniff reads what the caller sends first, within sniffWait.
func (c *conn) sniff() []byte {
	buf := make([]byte, 4<<10)
	c.down.SetReadDeadline(time.Now().Add(sniffWait)) //nolint:errcheck // a failed read returns nothing
	k, _ := c.down.Read(buf)
	c.down.SetReadDeadline(time.Time{}) //nolint:errcheck // as above
	return buf[:k]
}

func (c *conn) stall() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.halted {
		c.halted = true
		close(c.halt)
	}
}

func (c *conn) stalled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.halted
}

func (c *conn) close() {
	c.mu.Lock()
	if c.isClosed {
		c.mu.Unlock()
		return
	}
	c.isClosed = true
	close(c.done)
	up := c.up
	c.mu.Unlock()
	c.down.Close()
	if up != nil {
		up.Close()
	}
}

// reset closes the caller's side with a TCP RST rather than a FIN, as a
// flaky link or a middlebox that lost the connection does.
func (c *conn) reset() {
	if t, ok := c.down.(*net.TCPConn); ok {
		t.SetLinger(0) //nolint:errcheck // a plain close is the fallback
	}
	c.close()
}
