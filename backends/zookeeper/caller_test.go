package zookeeper

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/lockcheck/lockcheck/backends"
)

// The first bytes of each kind of connection a server's ports see, as
// ZooKeeper 3.8 writes them.
func TestQuorumCallerNamesServersByTheirID(t *testing.T) {
	all := []backends.Endpoint{{Name: "zk-1"}, {Name: "zk-2"}, {Name: "zk-3"}}
	election := func(version, id int64) []byte { return electionHead(version, id, "127.0.0.1:3888") }
	learner := func(typ uint32, id int64) []byte {
		b := binary.BigEndian.AppendUint32(nil, typ)
		b = binary.BigEndian.AppendUint64(b, 0x100000000) // zxid
		b = binary.BigEndian.AppendUint32(b, 20)          // LearnerInfo: id, protocol, config version
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint32(b, 0x10000)
		b = binary.BigEndian.AppendUint64(b, 0)
		return binary.BigEndian.AppendUint32(b, 0xffffffff) // no authinfo
	}
	for _, tt := range []struct {
		name string
		head []byte
		want string
	}{
		{"election, protocol 1", election(electionV1, 2), "zk-2"},
		{"election, protocol 2", election(electionV2, 3), "zk-3"},
		{"follower to leader", learner(followerInfo, 1), "zk-1"},
		{"observer to leader", learner(observerInfo, 2), "zk-2"},
		{"an id of no server", election(electionV1, 4), ""},
		{"a four-letter word", []byte("srvr"), ""},
		{"a client's connect request", append(binary.BigEndian.AppendUint32(nil, 44), make([]byte, 44)...), ""},
		{"a cut-short head", election(electionV1, 2)[:12], ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, QuorumCaller(all)(tt.head))
		})
	}
}

// electionHead is the first message of an election connection.
func electionHead(version, id int64, addr string) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(version))
	b = binary.BigEndian.AppendUint64(b, uint64(id))
	b = binary.BigEndian.AppendUint32(b, uint32(len(addr)))
	return append(b, addr...)
}

// A server's own election address becomes the one its peers reach it at,
// through its proxy; anything else goes on as it came.
func TestElectionRewriteNamesTheProxiedAddress(t *testing.T) {
	all := []backends.Endpoint{
		{Name: "zk-1", Ports: []int{2181, 2888, 3888}, Listen: []int{12181, 12888, 13888}},
		{Name: "zk-2", Ports: []int{2182, 2889, 3889}, Listen: []int{12182, 12889, 13889}},
	}
	rewrite := ElectionRewrite(all)
	for _, tt := range []struct {
		name       string
		head, want []byte
	}{
		{"protocol 1", electionHead(electionV1, 2, "127.0.0.1:13889"), electionHead(electionV1, 2, "127.0.0.1:3889")},
		{"protocol 2, several addresses", electionHead(electionV2, 1, "127.0.0.1:13888|10.0.0.1:13888"), electionHead(electionV2, 1, "127.0.0.1:3888|10.0.0.1:13888")},
		{"an address of no server", electionHead(electionV1, 1, "127.0.0.1:4000"), electionHead(electionV1, 1, "127.0.0.1:4000")},
		{"bytes after the message", append(electionHead(electionV1, 2, "127.0.0.1:13889"), 7), append(electionHead(electionV1, 2, "127.0.0.1:3889"), 7)},
		{"cut short", electionHead(electionV1, 2, "127.0.0.1:13889")[:25], electionHead(electionV1, 2, "127.0.0.1:13889")[:25]},
		{"a four-letter word", []byte("srvr"), []byte("srvr")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, rewrite(tt.head))
		})
	}
}
