package netproxy

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// relayTo is a relay of caller ip to the proxy at addr; clients dial it
// from 127.0.0.1, as a program does.
func relayTo(t *testing.T, addr, ip string) string {
	t.Helper()
	r, err := NewRelay("127.0.0.1:0", addr, ip)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return "127.0.0.1:" + strconv.Itoa(r.Port())
}

// A client that dials from wherever its system picks, through the relay
// of c1, is c1 to the proxy: c1's cut stalls it, c2's does not.
func TestRelayCarriesItsCallersLink(t *testing.T) {
	tests := []struct {
		name   string
		cut    string
		passes bool
	}{
		{"its own link cut", "c1", false},
		{"another caller's link cut", "c2", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, addr := network(t)
			relay := relayTo(t, addr, "127.0.2.1")
			open := dialFrom(t, "127.0.0.1", relay)
			require.True(t, roundTrip(open, time.Second), "transparent before the cut")
			n.Set(tt.cut, "node", Rule{Cut: true})
			assert.Equal(t, tt.passes, roundTrip(open, 300*time.Millisecond), "a connection open at the cut")
			assert.Equal(t, tt.passes, roundTrip(dialFrom(t, "127.0.0.1", relay), 300*time.Millisecond), "a connection made during the cut")
			n.Heal()
			assert.True(t, roundTrip(dialFrom(t, "127.0.0.1", relay), time.Second), "a new connection after the heal")
		})
	}
}

// A flaky link's reset reaches the client through the relay as a reset.
func TestRelayPassesAReset(t *testing.T) {
	n, addr := network(t)
	relay := relayTo(t, addr, "127.0.2.1")
	c := dialFrom(t, "127.0.0.1", relay)
	require.True(t, roundTrip(c, time.Second))
	n.Set("c1", "node", Rule{Reset: 1})
	c.SetReadDeadline(time.Now().Add(2 * time.Second)) //nolint:errcheck // the read fails instead
	_, err := c.Read(make([]byte, 16))
	assert.True(t, errors.Is(err, syscall.ECONNRESET), "reset, not closed: %v", err)
}

// Close closes the listener and every connection carried.
func TestRelayCloseLeavesNothing(t *testing.T) {
	_, addr := network(t)
	r, err := NewRelay("127.0.0.1:0", addr, "127.0.2.1")
	require.NoError(t, err)
	listen := "127.0.0.1:" + strconv.Itoa(r.Port())
	c := dialFrom(t, "127.0.0.1", listen)
	require.True(t, roundTrip(c, time.Second))
	require.NoError(t, r.Close())
	c.SetReadDeadline(time.Now().Add(time.Second)) //nolint:errcheck // the read fails instead
	_, err = c.Read(make([]byte, 16))
	assert.Error(t, err, "the carried connection is closed")
	_, err = net.DialTimeout("tcp", listen, time.Second)
	assert.Error(t, err, "nothing listens")
}
