package postgres

import (
	"bytes"
	"encoding/binary"

	"github.com/lockcheck/lockcheck/backends"
)

// protocol3 is the version a StartupMessage of protocol 3.0 carries.
const protocol3 = 3 << 16

// StartupCaller names the node that opened a connection to another, from
// its startup packet: a standby's walreceiver (and the pg_basebackup that
// made it) sends the node's name as its application_name (see
// createCluster). Their connections cannot come from an address of the
// node's choosing: libpq binds no source address, so on loopback they all
// come from 127.0.0.1. A connection that asks for TLS first, or names no
// node (a client, lockcheck's own checks), names no one.
func StartupCaller(all []backends.Endpoint) func(head []byte) string {
	return func(head []byte) string {
		name := applicationName(head)
		for _, e := range all {
			if name != "" && e.Name == name {
				return name
			}
		}
		return ""
	}
}

// applicationName reads application_name from a StartupMessage: its
// length, the protocol version, then parameter names and values, each
// ending in a zero byte, and a zero byte after the last.
func applicationName(head []byte) string {
	if len(head) < 8 || binary.BigEndian.Uint32(head[4:]) != protocol3 {
		return ""
	}
	n := int(binary.BigEndian.Uint32(head))
	if n < 8 || n > len(head) {
		return ""
	}
	fields := bytes.Split(head[8:n], []byte{0})
	for i := 0; i+1 < len(fields); i += 2 {
		if string(fields[i]) == "application_name" {
			return string(fields[i+1])
		}
	}
	return ""
}
