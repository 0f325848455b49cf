package nodetest

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Redis starts a redis-server of its own on a free loopback port, with no
// persistence, and waits until it answers; it returns the server's address
// and process (which a test may stop). The server is continued and killed
// when the test ends.
func Redis(t *testing.T) (string, *exec.Cmd) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed (run scripts/setup): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--dir", t.TempDir(), "--daemonize", "no")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT) //nolint:errcheck // it may be stopped by the test
		cmd.Process.Kill()                  //nolint:errcheck // gone already is fine
		cmd.Wait()                          //nolint:errcheck // killed
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	rdb := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	require.Eventually(t, func() bool { return rdb.Ping(context.Background()).Err() == nil }, 5*time.Second, 10*time.Millisecond)
	return addr, cmd
}
