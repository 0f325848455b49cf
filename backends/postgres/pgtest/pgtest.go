// Package pgtest starts a real PostgreSQL node for tests. A test binary
// that uses it has Main as its TestMain: the node is that binary started
// again.
package pgtest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/postgres"
	"github.com/lockcheck/lockcheck/internal/procstate"
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	self, err := os.Executable()
	require.NoError(t, err)
	ep := backends.Endpoint{Name: postgres.Primary, Ports: []int{port}, Dir: t.TempDir()}
	spec := postgres.Node(postgres.Primary, self, server)
	cmd := exec.Command(self, spec.Args(ep, nil)...)
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
			assert.Eventually(t, func() bool { return !procstate.Runs(pid, starts[pid]) }, 10*time.Second, 50*time.Millisecond, "postgres process %d outlived the test", pid)
		}
	})
	addr := ep.Addr()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return spec.Ready(ctx, addr) == nil
	}, 90*time.Second, 100*time.Millisecond, "postgres did not become ready (logs in %s)", ep.Dir)
	require.NoError(t, postgres.Prepare(context.Background(), addr))
	return addr
}
