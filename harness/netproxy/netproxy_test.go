package netproxy

import (
	"bufio"
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echo is a node: a loopback server that sends every line back.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dialFrom connects to addr from the loopback address ip.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: time.Second}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// reaches reports whether a line sent from ip to addr on a new connection
// comes back; a connection reset while it is made does not.
func reaches(ip, addr string) bool {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	return roundTrip(c, time.Second)
}

// roundTrip sends a line and reports whether it came back within wait.
func roundTrip(c net.Conn, wait time.Duration) bool {
	c.SetDeadline(time.Now().Add(wait)) //nolint:errcheck // the read fails instead
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "ping\n"
}

// network is a proxy named node in front of an echo server, with callers
// c1 (127.0.2.1) and c2 (127.0.2.2) named.
func network(t *testing.T) (*Network, string) {
	t.Helper()
	n := New()
	t.Cleanup(func() { n.Close() })
	n.Name("127.0.2.1", "c1")
	n.Name("127.0.2.2", "c2")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	require.NoError(t, n.Proxy("node", addr, echo(t), func(head []byte) string {
		if strings.HasPrefix(string(head), "I am c3\n") {
			return "c3"
		}
		return ""
	}, func(head []byte) []byte {
		return bytes.Replace(head, []byte("call me at node-own"), []byte("call me at node-proxied"), 1)
	}))
	return n, addr
}

func TestCutStallsOneLinkOnly(t *testing.T) {
	tests := []struct {
		name   string
		from   string
		passes bool
	}{
		{"the cut caller", "127.0.2.1", false},
		{"another caller", "127.0.2.2", true},
		{"a caller of no link (lockcheck itself)", "127.0.0.1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, addr := network(t)
			open := dialFrom(t, tt.from, addr)
			require.True(t, roundTrip(open, time.Second), "transparent before the cut")
			n.Set("c1", "node", Rule{Cut: true})
			assert.Equal(t, tt.passes, roundTrip(open, 300*time.Millisecond), "a connection open at the cut")
			assert.Equal(t, tt.passes, roundTrip(dialFrom(t, tt.from, addr), 300*time.Millisecond), "a connection made during the cut")
			n.Heal()
			assert.True(t, roundTrip(dialFrom(t, tt.from, addr), time.Second), "a new connection after the heal")
		})
	}
}

func TestHealClosesStalledConnections(t *testing.T) {
	n, addr := network(t)
	c := dialFrom(t, "127.0.2.1", addr)
	require.True(t, roundTrip(c, time.Second))
	n.Set("node", "c1", Rule{Cut: true})
	require.False(t, roundTrip(c, 200*time.Millisecond))
	n.Set("node", "c1", Rule{})
	c.SetReadDeadline(time.Now().Add(time.Second)) //nolint:errcheck // the read fails instead
	_, err := c.Read(make([]byte, 16))
	assert.Error(t, err, "a connection stalled by a cut is closed when it heals")
}

func TestLatencyAndReset(t *testing.T) {
	n, addr := network(t)
	n.Set("c1", "node", Rule{Latency: 150 * time.Millisecond})
	start := time.Now()
	require.True(t, roundTrip(dialFrom(t, "127.0.2.1", addr), 2*time.Second))
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "150ms each way")

	n.Set("c1", "node", Rule{Reset: 1})
	assert.False(t, reaches("127.0.2.1", addr), "every new connection is reset")
	assert.True(t, reaches("127.0.2.2", addr), "other links pass")
}

func TestCloseLeavesNothing(t *testing.T) {
	n, addr := network(t)
	open := dialFrom(t, "127.0.2.1", addr)
	require.True(t, roundTrip(open, time.Second))
	n.Set("c2", "node", Rule{Cut: true})
	dialFrom(t, "127.0.2.2", addr) // held by the cut
	require.NoError(t, n.Close())
	assert.Zero(t, n.Conns(), "every connection closed")
	_, err := net.DialTimeout("tcp", addr, time.Second)
	assert.Error(t, err, "no listener left")
	assert.False(t, roundTrip(open, 200*time.Millisecond))
}

func TestCallerNamedByWhatItSends(t *testing.T) {
	n, addr := network(t)
	n.Set("c3", "node", Rule{Cut: true})
	introduced := dialFrom(t, "127.0.0.1", addr)
	introduced.Write([]byte("I am c3\n")) //nolint:errcheck // the round trip fails instead
	assert.False(t, roundTrip(introduced, 300*time.Millisecond), "a caller that names itself c3 is cut")
	assert.True(t, roundTrip(dialFrom(t, "127.0.0.1", addr), time.Second), "one that does not passes")
}

// What an unnamed caller sends first reaches the node rewritten; a named
// caller's bytes are never looked at.
func TestFirstBytesRewritten(t *testing.T) {
	for _, tt := range []struct {
		name, from, want string
	}{
		{"an unnamed caller", "127.0.0.1", "call me at node-proxied\n"},
		{"a named caller", "127.0.2.1", "call me at node-own\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, addr := network(t)
			c := dialFrom(t, tt.from, addr)
			c.SetDeadline(time.Now().Add(time.Second)) //nolint:errcheck // the read fails instead
			_, err := c.Write([]byte("call me at node-own\n"))
			require.NoError(t, err)
			line, err := bufio.NewReader(c).ReadString('\n')
			require.NoError(t, err)
			assert.Equal(t, tt.want, line)
		})
	}
}
