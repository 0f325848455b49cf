// Package pgtest starts a real PostgreSQL node for tests. A test binary
// that uses it has Main as its TestMain: the node is that binary started
// again.
package pgtest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/postgres"
	"github.com/lockcheck/lockcheck/harness/procstate"
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
	addr := start(t, postgres.Node(postgres.Primary, self, server), nil)
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
	return start(t, postgres.PoolerNode(self, pgbouncer, pool), []backends.Endpoint{{Name: postgres.Primary, Host: host, Ports: []int{p}}})
}

// start starts the node spec on a free port, with the other nodes all, and
// waits until it is ready.
func start(t *testing.T, spec backends.NodeSpec, all []backends.Endpoint) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	self, err := os.Executable()
	require.NoError(t, err)
	ep := backends.Endpoint{Name: spec.Name, Ports: []int{port}, Dir: t.TempDir()}
	cmd := exec.Command(self, spec.Args(ep, all)...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }() //nolint:errcheck // killed below
	t.Cleanup(func() {
		tree := procstate.Descendants(cmd.Process.Pid)
		starts := map[int]string{}
		for _, pid := range tree {
			starts[pid], _ = procstate.StartTime(pid)
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // gone is fine
		for _, pid := range tree {
			syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck // gone is fine
		}
		<-exited
		for _, pid := range tree {
			assert.Eventually(t, func() bool { return !procstate.Runs(pid, starts[pid]) }, 10*time.Second, 50*time.Millisecond, "%s process %d outlived the test", spec.Name, pid)
		}
	})
	addr := ep.Addr()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return spec.Ready(ctx, addr) == nil
	}, 90*time.Second, 100*time.Millisecond, "%s did not become ready (logs in %s)", spec.Name, ep.Dir)
	return addr
}
