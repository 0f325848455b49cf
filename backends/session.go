package backends

import (
	"fmt"
	"strconv"
	"strings"
)

// SessionName is how a grant, a release, an inspection and a kill-session
// event name a server session: the node, and the number the server knows
// the session by (a PostgreSQL backend pid, a MariaDB connection id).
func SessionName(node string, id int64) string { return node + "/" + strconv.FormatInt(id, 10) }

// AddrsByName maps each of eps's names to its client address: the nodes a
// service handle ends sessions on.
func AddrsByName(eps []Endpoint) map[string]string {
	out := make(map[string]string, len(eps))
	for _, e := range eps {
		out[e.Name] = e.Addr()
	}
	return out
}

// SessionOn reads session (SessionName) against nodes (AddrsByName): the
// client address of its node and the session's number there.
func SessionOn(nodes map[string]string, session string) (addr string, id int64, err error) {
	node, idText, ok := strings.Cut(session, "/")
	id, perr := strconv.ParseInt(idText, 10, 64)
	addr, known := nodes[node]
	if !ok || perr != nil || !known {
		return "", 0, fmt.Errorf("%q names no session of this run's nodes", session)
	}
	return addr, id, nil
}
