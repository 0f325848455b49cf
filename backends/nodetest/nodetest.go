// Package nodetest starts a backend's node for a test: a node that is the
// test binary itself, started again with the node's environment (a
// PostgreSQL, PgBouncer or MariaDB node), as the harness would start it.
package nodetest

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
	"github.com/lockcheck/lockcheck/internal/procstate"
)

// Start starts a node of spec whose program is this test binary (a node
// that is lockcheck itself, run again with the spec's environment) on a
// free port, with the other nodes all, and waits until it is ready; it
// returns the node's address. It kills the node, and every process it
// forked, when the test ends, and fails the test if one outlives it.
func Start(t *testing.T, spec backends.NodeSpec, all []backends.Endpoint) string {
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
