package netproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Relay hands a client that cannot choose the address it dials from (a
// lock client program in any language) an address of its own: it listens
// on a loopback port and carries every connection made to it on to
// upstream, dialled from source. The proxies in front of the node (or, in
// the docker runtime, the node's own packet rules) then see the slot's
// address and cut, slow or reset the connection as that slot's link, as
// they do for lockcheck's own clients, which dial from source themselves.
//
// A Relay passes bytes only: what a link's rule does to the upstream side
// (stall, delay, reset) reaches the client through it unchanged, a reset
// as a reset.
type Relay struct {
	ln       net.Listener
	upstream string
	dialer   net.Dialer

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewRelay listens on listen (host:port; port 0 picks one) and carries
// its connections to upstream from the address source ("" lets the
// system pick).
func NewRelay(listen, upstream, source string) (*Relay, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	r := &Relay{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	r.dialer.Timeout = 5 * time.Second
	if source != "" {
		r.dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(source)}
	}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Port is the port the relay listens on.
func (r *Relay) Port() int { return r.ln.Addr().(*net.TCPAddr).Port }

// Close stops listening and closes every connection it carries.
func (r *Relay) Close() error {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	err := r.ln.Close()
	r.wg.Wait()
	return err
}

// track registers c, or closes it when the relay is closed.
func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.Close()
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	c.Close()
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		down, err := r.ln.Accept()
		if err != nil {
			return // closed
		}
		if !r.track(down) {
			return
		}
		r.wg.Add(1)
		go r.carry(down)
	}
}

// carry dials upstream for down and copies both ways until one side ends;
// an upstream that was reset (a flaky link) resets down too.
func (r *Relay) carry(down net.Conn) {
	defer r.wg.Done()
	defer r.untrack(down)
	up, err := r.dialer.Dial("tcp", r.upstream)
	if err != nil {
		return // the node is down: the client sees its connection close
	}
	if !r.track(up) {
		return
	}
	defer r.untrack(up)
	done := make(chan error, 2)
	go func() { _, err := io.Copy(up, down); done <- err }()
	go func() {
		_, err := io.Copy(down, up)
		if err != nil && !errors.Is(err, net.ErrClosed) {
			if t, ok := down.(*net.TCPConn); ok {
				t.SetLinger(0) //nolint:errcheck // a plain close is the fallback
			}
		}
		done <- err
	}()
	<-done
	down.Close()
	up.Close()
	<-done
}
