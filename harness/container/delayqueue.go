package container

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A slow link holds every packet of the link for its latency in
// lockcheck itself: the node's iptables rules send the packets from and to
// the peer to a netfilter queue in the node's network namespace
// (NFQUEUE), and the delayQueue bound to it gives each its verdict when
// its time has come. Kernels without the netem queueing discipline (tc's
// usual way to delay packets) have netfilter queues, and the rules say
// --queue-bypass: with no lockcheck bound to the queue (one killed with
// SIGKILL), packets pass at once instead of stalling the container.

// delayQueueNum is the netfilter queue of every node's namespace
// (namespaces have queues of their own).
const delayQueueNum = 7300

// The nfnetlink_queue protocol (linux/netfilter/nfnetlink_queue.h).
const (
	nfnlSubsysQueue    = 3
	nfqnlMsgPacket     = 0
	nfqnlMsgVerdict    = 1
	nfqnlMsgConfig     = 2
	nfqaPacketHdr      = 1
	nfqaVerdictHdr     = 2
	nfqaPayload        = 10
	nfqaCfgCmd         = 1
	nfqaCfgParams      = 2
	nfqaCfgQueueMaxlen = 3
	nfqaCfgMask        = 4
	nfqaCfgFlags       = 5
	nfqnlCfgCmdBind    = 1
	nfqnlCopyPacket    = 2
	// A full queue lets packets pass rather than drop them; big (GSO)
	// packets come whole rather than cut up for lockcheck.
	nfqaCfgFFailOpen = 1 << 0
	nfqaCfgFGSO      = 1 << 2
	nfAccept         = 1
	nfInetLocalIn    = 1 // the hook of a packet arriving for the node
	// ipHeaderLen is what lockcheck reads of a packet: its addresses.
	ipHeaderLen = 20
)

// delay is a link's latency plus up to jitter more.
type delay struct{ latency, jitter time.Duration }

func (d delay) draw() time.Duration {
	if d.jitter <= 0 {
		return d.latency
	}
	return d.latency + rand.N(d.jitter)
}

// delayQueue holds the packets of a node's slow links.
type delayQueue struct {
	f   *os.File
	pid int // the node's process whose namespace the queue is in

	mu    sync.Mutex
	peers map[netip.Addr]delay
	// last is when the latest packet of each peer and direction goes: a
	// packet never overtakes the one before it (jitter would reorder the
	// stream, which TCP takes for loss).
	last   map[flow]time.Time
	held   heldPackets
	closed bool
	wake   chan struct{}
	done   chan struct{} // closed by close
	// released and received close when the releaser and the receiver
	// end.
	released, received chan struct{}
}

type flow struct {
	peer netip.Addr
	in   bool
}

// openDelayQueue binds the netfilter queue of the network namespace of
// process pid.
func openDelayQueue(pid int) (*delayQueue, error) {
	fd, err := socketInNamespace(pid)
	if err != nil {
		return nil, err
	}
	q := &delayQueue{
		f: os.NewFile(uintptr(fd), "nfqueue"), pid: pid,
		peers: map[netip.Addr]delay{}, last: map[flow]time.Time{},
		wake: make(chan struct{}, 1), done: make(chan struct{}),
		released: make(chan struct{}), received: make(chan struct{}),
	}
	if err := q.bind(); err != nil {
		q.f.Close()
		return nil, fmt.Errorf("binding netfilter queue %d in the namespace of process %d: %w", delayQueueNum, pid, err)
	}
	go q.receive()
	go q.release()
	return q, nil
}

// socketInNamespace opens a netfilter netlink socket in the network
// namespace of process pid: a socket stays in the namespace it was made
// in, so only its creation needs a thread that entered the namespace.
func socketInNamespace(pid int) (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- result{-1, err}
			runtime.UnlockOSThread()
			return
		}
		defer own.Close()
		target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			ch <- result{-1, err}
			runtime.UnlockOSThread()
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{-1, fmt.Errorf("entering the network namespace of process %d: %w", pid, err)}
			runtime.UnlockOSThread()
			return
		}
		fd, serr := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_NETFILTER)
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread stays locked and ends with this goroutine: it
			// is in the wrong namespace for anyone else.
			if serr == nil {
				unix.Close(fd)
			}
			ch <- result{-1, fmt.Errorf("leaving the network namespace of process %d: %w", pid, err)}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{fd, serr}
	}()
	r := <-ch
	if r.err != nil {
		return -1, r.err
	}
	if err := unix.Bind(r.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(r.fd)
		return -1, err
	}
	// Packets come in bursts: a large buffer, and no error when it
	// overflows anyway (the queue fails open when full).
	unix.SetsockoptInt(r.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)  //nolint:errcheck // the default buffer works, only smaller
	unix.SetsockoptInt(r.fd, unix.SOL_NETLINK, unix.NETLINK_NO_ENOBUFS, 1) //nolint:errcheck // as above
	return r.fd, nil
}

// bind makes the socket the queue's listener: it receives each packet's
// header and the first bytes of its IP header.
func (q *delayQueue) bind() error {
	cmd := []byte{nfqnlCfgCmdBind, 0, 0, 0}
	params := binary.BigEndian.AppendUint32(nil, ipHeaderLen)
	params = append(params, nfqnlCopyPacket)
	flags := binary.BigEndian.AppendUint32(nil, nfqaCfgFFailOpen|nfqaCfgFGSO)
	for i, attrs := range [][]attr{
		{{nfqaCfgCmd, cmd}},
		{{nfqaCfgParams, params}, {nfqaCfgQueueMaxlen, binary.BigEndian.AppendUint32(nil, 4096)}},
		{{nfqaCfgMask, flags}, {nfqaCfgFlags, flags}},
	} {
		seq := uint32(i + 1)
		if _, err := q.f.Write(queueMessage(nfqnlMsgConfig, unix.NLM_F_REQUEST|unix.NLM_F_ACK, seq, attrs)); err != nil {
			return err
		}
		if err := q.ack(seq); err != nil {
			return err
		}
	}
	return nil
}

// ack waits for the kernel's answer to the request numbered seq.
func (q *delayQueue) ack(seq uint32) error {
	if err := q.f.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	defer q.f.SetReadDeadline(time.Time{}) //nolint:errcheck // set above on the same file
	buf := make([]byte, 8192)
	for {
		n, err := q.f.Read(buf)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Type != unix.NLMSG_ERROR || m.Header.Seq != seq || len(m.Data) < 4 {
				continue
			}
			if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
				return unix.Errno(-code)
			}
			return nil
		}
	}
}

type attr struct {
	typ  uint16
	data []byte
}

// queueMessage is a netlink message of the queue subsystem for
// delayQueueNum.
func queueMessage(msg uint16, flags uint16, seq uint32, attrs []attr) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN, 64)
	// nfgenmsg: family unspecified, version 0, the queue (big-endian).
	b = append(b, unix.AF_UNSPEC, 0)
	b = binary.BigEndian.AppendUint16(b, delayQueueNum)
	for _, a := range attrs {
		b = binary.NativeEndian.AppendUint16(b, uint16(4+len(a.data)))
		b = binary.NativeEndian.AppendUint16(b, a.typ)
		b = append(b, a.data...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], nfnlSubsysQueue<<8|msg)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], seq)
	return b
}

// set delays the packets from and to peer by d; the zero delay lets them
// pass again. It reports whether the queue holds any peer's packets.
func (q *delayQueue) set(peer netip.Addr, d delay) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if d == (delay{}) {
		delete(q.peers, peer)
	} else {
		q.peers[peer] = d
	}
	return len(q.peers) > 0
}

// receive takes the queue's packets and holds each until its time.
func (q *delayQueue) receive() {
	defer close(q.received)
	buf := make([]byte, 1<<16)
	for {
		n, err := q.f.Read(buf)
		if errors.Is(err, os.ErrClosed) {
			return
		}
		if errors.Is(err, unix.ENOBUFS) {
			continue // packets overflowed the socket's buffer: the queue fails open
		}
		if err != nil {
			// Nothing else is expected: rather than spin on it, stop
			// taking packets; the queue lets them pass once full.
			return
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		now := time.Now()
		var passing []uint32
		q.mu.Lock()
		for _, m := range msgs {
			if m.Header.Type != nfnlSubsysQueue<<8|nfqnlMsgPacket {
				continue
			}
			id, f, ok := parsePacket(m.Data)
			if !ok {
				continue
			}
			if q.closed {
				// The releaser has ended: nothing holds it any more.
				passing = append(passing, id)
				continue
			}
			at := now
			if d, slow := q.peers[f.peer]; slow {
				at = now.Add(d.draw())
				if last := q.last[f]; last.After(at) {
					at = last
				}
				q.last[f] = at
			}
			heap.Push(&q.held, heldPacket{at: at, id: id})
		}
		q.mu.Unlock()
		for _, id := range passing {
			q.accept(id)
		}
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// parsePacket reads a queued packet's id and its flow: the peer is the
// source of a packet coming in, the destination of one going out.
func parsePacket(data []byte) (uint32, flow, bool) {
	if len(data) < 4 {
		return 0, flow{}, false
	}
	var (
		id      uint32
		hook    byte
		payload []byte
		hasHdr  bool
	)
	for b := data[4:]; len(b) >= 4; {
		l := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) & 0x3fff // without the nested and byte-order flags
		if l < 4 || l > len(b) {
			break
		}
		v := b[4:l]
		switch typ {
		case nfqaPacketHdr:
			if len(v) >= 7 {
				id, hook, hasHdr = binary.BigEndian.Uint32(v), v[6], true
			}
		case nfqaPayload:
			payload = v
		}
		b = b[min((l+3)&^3, len(b)):]
	}
	if !hasHdr {
		return 0, flow{}, false
	}
	f := flow{in: hook == nfInetLocalIn}
	if len(payload) >= ipHeaderLen && payload[0]>>4 == 4 {
		if f.in {
			f.peer = netip.AddrFrom4([4]byte(payload[12:16]))
		} else {
			f.peer = netip.AddrFrom4([4]byte(payload[16:20]))
		}
	}
	return id, f, true
}

// release gives each held packet its verdict when its time has come, and
// every one at once when the queue closes.
func (q *delayQueue) release() {
	defer close(q.released)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		q.mu.Lock()
		now := time.Now()
		var due []uint32
		for q.held.Len() > 0 && (q.closed || !q.held[0].at.After(now)) {
			due = append(due, heap.Pop(&q.held).(heldPacket).id)
		}
		wait := time.Hour
		if q.held.Len() > 0 {
			wait = q.held[0].at.Sub(now)
		}
		closed := q.closed
		q.mu.Unlock()
		for _, id := range due {
			q.accept(id)
		}
		if closed {
			return
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-q.wake:
		case <-q.done:
		}
	}
}

func (q *delayQueue) accept(id uint32) {
	v := binary.BigEndian.AppendUint32(nil, nfAccept)
	v = binary.BigEndian.AppendUint32(v, id)
	q.f.Write(queueMessage(nfqnlMsgVerdict, unix.NLM_F_REQUEST, 0, []attr{{nfqaVerdictHdr, v}})) //nolint:errcheck // a packet lost here is one TCP sends again
}

// close lets every held packet go and unbinds the queue (the rules that
// fed it are out by then, or go with the container).
func (q *delayQueue) close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	q.mu.Unlock()
	close(q.done)
	// The releaser's last round lets every held packet go; the receiver
	// stops when the socket closes after it.
	<-q.released
	q.f.Close()
	<-q.received
}

type heldPacket struct {
	at time.Time
	id uint32
}

// heldPackets is a min-heap of packets by the time they go.
type heldPackets []heldPacket

func (h heldPackets) Len() int           { return len(h) }
func (h heldPackets) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h heldPackets) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *heldPackets) Push(x any)        { *h = append(*h, x.(heldPacket)) }
func (h *heldPackets) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
