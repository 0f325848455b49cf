package procstate

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A process runs until it dies; a dead child that is not reaped yet (a
// zombie) no longer runs; a pid with another start time is another process.
func TestRuns(t *testing.T) {
	start, err := StartTime(os.Getpid())
	require.NoError(t, err)
	assert.True(t, Runs(os.Getpid(), start))
	assert.False(t, Runs(os.Getpid(), start+"1"), "another process under the same pid")

	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	child, err := StartTime(cmd.Process.Pid)
	require.NoError(t, err)
	assert.True(t, Runs(cmd.Process.Pid, child))
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	assert.Eventually(t, func() bool { return !Runs(cmd.Process.Pid, child) }, 5*time.Second, 10*time.Millisecond,
		"a killed child is a zombie until it is reaped, and a zombie does not run")
	cmd.Wait() //nolint:errcheck // killed
	assert.False(t, Runs(cmd.Process.Pid, child))
}

// WaitStopped returns once every thread of a stopped process is stopped.
func TestWaitStopped(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	defer func() { cmd.Process.Kill(); cmd.Wait() }() //nolint:errcheck // cleanup
	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	require.NoError(t, WaitStopped(cmd.Process.Pid, 5*time.Second))
	stopped, err := AllThreadsStopped(cmd.Process.Pid)
	require.NoError(t, err)
	assert.True(t, stopped)
	require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
}
