package cli

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/internal/spawn/cagetest"
	"github.com/lockcheck/lockcheck/internal/testtier"
)

// Nothing a lock client program starts outlives lockcheck: a program that
// forks, and setsids and double-forks, then speaks the protocol (the Go
// reference client) leaves no process after a run that ends, one whose
// faults kill and stop the clients, a run stopped by Ctrl-C, a run whose lockcheck is killed by SIGKILL, and a
// client check.
func TestNothingAClientStartsSurvives(t *testing.T) {
	testtier.Long(t)
	requireRedisServer(t)
	bin := goClient(t)
	tests := []struct {
		name string
		args []string
		// end ends lockcheck (nil: it ends by itself).
		end func(t *testing.T, cmd *exec.Cmd, store string)
		// code is lockcheck's exit code, or anyVerdict: faults on a busy
		// machine may miss (unknown) and the processes are what is tested.
		code int
	}{
		{"a run that ends", []string{"run", "--time-limit", "3s", "--nemesis", "none"}, nil, exitValid},
		{"a run that kills and pauses its clients", []string{"run", "--time-limit", "6s", "--nemesis", "kill-client,pause-client"}, nil, anyVerdict},
		{"a run stopped by Ctrl-C", []string{"run", "--time-limit", "5m", "--nemesis", "none"}, endBy(syscall.SIGINT), exitUnknown},
		{"a run whose lockcheck is killed", []string{"run", "--time-limit", "5m", "--nemesis", "none"}, endBy(syscall.SIGKILL), -1},
		{"a client check", []string{"client", "check"}, nil, exitValid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marker := cagetest.Marker()
			client := "'" + cagetest.Forking() + "' " + marker + " '" + bin + "'"
			store := t.TempDir()
			args := append(tt.args, "--client", client, "--topology", "redis", "--out", store)
			cmd, stdout, stderr := lockcheckProcess(t, args...)
			cagetest.AwaitForks(t, marker, 60*time.Second)
			if tt.end != nil {
				tt.end(t, cmd, store)
			}
			code := exitCode(t, cmd)
			if tt.code == anyVerdict {
				assert.Contains(t, []int{exitValid, exitInvalid, exitUnknown}, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			} else {
				assert.Equal(t, tt.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
			cagetest.AssertNoneLeft(t, marker)
		})
	}
}

// anyVerdict is any exit code of a run that gave a verdict.
const anyVerdict = -2

// endBy ends lockcheck by sig once the run in store has granted the lock.
func endBy(sig syscall.Signal) func(t *testing.T, cmd *exec.Cmd, store string) {
	return func(t *testing.T, cmd *exec.Cmd, store string) {
		waitForGrants(t, store)
		require.NoError(t, cmd.Process.Signal(sig))
	}
}
