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
// reference client) leaves no process after a run that ends, a run
// stopped by Ctrl-C, a run whose lockcheck is killed by SIGKILL, and a
// client check.
func TestNothingAClientStartsSurvives(t *testing.T) {
	testtier.Long(t)
	requireRedisServer(t)
	bin := goClient(t)
	tests := []struct {
		name string
		args []string
		// end ends lockcheck (nil: it ends by itself) and says what exit
		// code it expects.
		end  func(t *testing.T, cmd *exec.Cmd, store string)
		code int
	}{
		{"a run that ends", []string{"run", "--time-limit", "3s"}, nil, exitValid},
		{"a run stopped by Ctrl-C", []string{"run", "--time-limit", "5m"}, endBy(syscall.SIGINT), exitUnknown},
		{"a run whose lockcheck is killed", []string{"run", "--time-limit", "5m"}, endBy(syscall.SIGKILL), -1},
		{"a client check", []string{"client", "check"}, nil, exitValid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marker := cagetest.Marker()
			client := "'" + cagetest.Forking() + "' " + marker + " '" + bin + "'"
			store := t.TempDir()
			args := append(tt.args, "--client", client, "--topology", "redis", "--out", store)
			if tt.args[0] == "run" {
				args = append(args, "--nemesis", "none")
			}
			cmd, stdout, stderr := lockcheckProcess(t, args...)
			cagetest.AwaitForks(t, marker, 60*time.Second)
			if tt.end != nil {
				tt.end(t, cmd, store)
			}
			assert.Equal(t, tt.code, exitCode(t, cmd), "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			cagetest.AssertNoneLeft(t, marker)
		})
	}
}

// endBy ends lockcheck by sig once the run in store has granted the lock.
func endBy(sig syscall.Signal) func(t *testing.T, cmd *exec.Cmd, store string) {
	return func(t *testing.T, cmd *exec.Cmd, store string) {
		waitForGrants(t, store)
		require.NoError(t, cmd.Process.Signal(sig))
	}
}
