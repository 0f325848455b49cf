// Package pgtest starts a real PostgreSQL node for tests. A test binary
// that uses it has Main as its TestMain: the node is that binary started
// again.
package pgtest

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/nodetest"
	"github.com/lockcheck/lockcheck/backends/postgres"
)

// Main is the TestMain of a package whose tests start nodes: the node is
// the test binary started again with postgres.NodeEnv set.
func Main(m *testing.M) {
	if postgres.RunNodeFromEnv() {
		return
	}
	os.Exit(m.Run())
}

// Require fails the test unless PostgreSQL is installed, and returns its
// server.
func Require(t *testing.T) string {
	t.Helper()
	server, err := postgres.Server.Find(postgres.Server.Name)
	if err != nil {
		t.Fatalf("PostgreSQL is not installed (run scripts/setup): %v", err)
	}
	return server
}

// Start starts a real PostgreSQL node and returns its address; it stops
// the node, and every process it forked, when the test ends, and fails the
// test if one outlives it.
func Start(t *testing.T) string {
	t.Helper()
	server := Require(t)
	self, err := os.Executable()
	require.NoError(t, err)
	addr := nodetest.Start(t, postgres.Node(postgres.Primary, self, server), nil)
	require.NoError(t, postgres.Prepare(context.Background(), addr))
	return addr
}

// StartPooler starts a real PgBouncer in front of the PostgreSQL node at
// primary (from Start) and returns its address; it is stopped as Start's
// node is.
func StartPooler(t *testing.T, primary string, pool postgres.Pool) string {
	t.Helper()
	pgbouncer, err := postgres.Pooler.Find(postgres.Pooler.Name)
	if err != nil {
		t.Fatalf("PgBouncer is not installed (run scripts/setup): %v", err)
	}
	self, err := os.Executable()
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(primary)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	return nodetest.Start(t, postgres.PoolerNode(self, pgbouncer, pool), []backends.Endpoint{{Name: postgres.Primary, Host: host, Ports: []int{p}}})
}
