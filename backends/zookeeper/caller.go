package zookeeper

import (
	"encoding/binary"
	"net"
	"strconv"
	"strings"

	"github.com/lockcheck/lockcheck/backends"
)

// The first eight bytes of a server's election connection (ZooKeeper's
// QuorumCnxManager protocol versions 1 and 2), followed by its id.
const (
	electionV1 int64 = -65536
	electionV2 int64 = -65535
)

// The packet types a learner opens its connection to the leader's quorum
// port with (Leader.FOLLOWERINFO, Leader.OBSERVERINFO).
const (
	followerInfo = 11
	observerInfo = 16
)

// QuorumCaller names the server that opened a connection to a peer's
// quorum or election port, from the first message it sends, which carries
// its id: an election connection starts with the protocol version and the
// id, a learner's connection to the leader with a FOLLOWERINFO packet
// whose data starts with the id. A server's own connections cannot come
// from an address of its choosing: ZooKeeper 3.8 connects to its peers
// from unbound sockets, so on loopback they all come from 127.0.0.1. A
// client's connection or a four-letter word names no server.
func QuorumCaller(all []backends.Endpoint) func(head []byte) string {
	return func(head []byte) string {
		id, ok := callerID(head)
		if !ok || id < 1 || id > int64(len(all)) {
			return ""
		}
		return all[id-1].Name // MyID: its position, from 1
	}
}

// callerID reads the server id from the first bytes of a connection
// between servers.
func callerID(head []byte) (int64, bool) {
	if len(head) >= 16 {
		if v := int64(binary.BigEndian.Uint64(head)); v == electionV1 || v == electionV2 {
			return int64(binary.BigEndian.Uint64(head[8:])), true
		}
	}
	// type (int), zxid (long), data (int length, then LearnerInfo: the
	// id first).
	if len(head) >= 24 {
		typ, n := binary.BigEndian.Uint32(head), binary.BigEndian.Uint32(head[12:])
		if (typ == followerInfo || typ == observerInfo) && n >= 8 {
			return int64(binary.BigEndian.Uint64(head[16:])), true
		}
	}
	return 0, false
}

// ElectionRewrite puts, into the first message of a server's election
// connection, the address its peers reach it at in place of the one it
// listens on. A server names the election address of its own line in
// zoo.cfg, which behind the proxies is where it listens itself, and a peer
// of a higher id closes such a connection and calls back that address
// (QuorumCnxManager.handleConnection): past the proxies, so the election
// messages between the two would cross any cut.
func ElectionRewrite(all []backends.Endpoint) func(head []byte) []byte {
	reached := map[string]string{}
	for _, e := range all {
		if len(e.Ports) == 3 {
			reached[net.JoinHostPort(e.HostName(), strconv.Itoa(e.ListenPort(2)))] = e.AddrOf(2)
		}
	}
	return func(head []byte) []byte {
		// version (long), id (long), the length of the addresses (int),
		// then the addresses, host:port, separated by |.
		if len(head) < 20 {
			return head
		}
		if v := int64(binary.BigEndian.Uint64(head)); v != electionV1 && v != electionV2 {
			return head
		}
		n := int(binary.BigEndian.Uint32(head[16:]))
		if n <= 0 || 20+n > len(head) {
			return head
		}
		addrs := strings.Split(string(head[20:20+n]), "|")
		for i, a := range addrs {
			if to, ok := reached[a]; ok {
				addrs[i] = to
			}
		}
		joined := strings.Join(addrs, "|")
		out := binary.BigEndian.AppendUint32(append([]byte(nil), head[:16]...), uint32(len(joined)))
		return append(append(out, joined...), head[20+n:]...)
	}
}
