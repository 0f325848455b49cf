package spawn

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/internal/spawn/cagetest"
)

// forking is the hostile program of the cage's tests.
var forking = cagetest.Forking()

// cagedParentEnv makes the test binary a parent that starts forking caged
// (with the marker the variable holds), prints the keeper's pid and waits
// to be killed.
const cagedParentEnv = "SPAWN_TEST_CAGED_PARENT"

// Nothing a caged program starts survives the cage, however it ends: the
// program's own exit (whose status the keeper passes on), KillCaged, or
// the death by SIGKILL of the process that started it.
func TestNothingOutlivesTheCage(t *testing.T) {
	tests := []struct {
		name string
		end  func(t *testing.T, marker string)
	}{
		{"the program exits on EOF of its stdin", func(t *testing.T, marker string) {
			cmd := exec.Command(forking, marker, "sh", "-c", "cat >/dev/null; exit 3")
			stdin, err := cmd.StdinPipe()
			require.NoError(t, err)
			require.NoError(t, StartCaged(cmd))
			cagetest.AwaitForks(t, marker, 10*time.Second)
			require.NoError(t, stdin.Close())
			err = cmd.Wait()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit)
			assert.Equal(t, 3, exit.ExitCode(), "the keeper exits as the program did")
		}},
		{"KillCaged", func(t *testing.T, marker string) {
			cmd := exec.Command(forking, marker, "sleep", "600")
			require.NoError(t, StartCaged(cmd))
			cagetest.AwaitForks(t, marker, 10*time.Second)
			KillCaged(cmd.Process.Pid)
			require.Error(t, cmd.Wait())
			assert.Equal(t, "signal: killed", cmd.ProcessState.String(), "the program died of SIGKILL, and the keeper says so")
		}},
		{"its starter dies of SIGKILL", func(t *testing.T, marker string) {
			parent := exec.Command(os.Args[0], "-test.run", "^$")
			parent.Env = append(os.Environ(), cagedParentEnv+"="+marker)
			out, err := parent.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, parent.Start())
			t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
			line, err := bufio.NewReader(out).ReadString('\n')
			require.NoError(t, err)
			require.NotContains(t, line, "error")
			cagetest.AwaitForks(t, marker, 10*time.Second)
			require.NoError(t, parent.Process.Kill())
			_ = parent.Wait()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marker := cagetest.Marker()
			tt.end(t, marker)
			cagetest.AssertNoneLeft(t, marker)
		})
	}
}

// A program that cannot start is an error of StartCaged, as of Start, and
// leaves no keeper behind.
func TestStartCagedReportsAProgramThatCannotStart(t *testing.T) {
	notAProgram := filepath.Join(t.TempDir(), "notes.txt")
	require.NoError(t, os.WriteFile(notAProgram, []byte("no program\n"), 0o755))
	tests := []struct {
		name, path, want string
	}{
		{"no such file", "/nonexistent/lockcheck-no-such-program", "no such file or directory"},
		{"not a program", notAProgram, "exec format error"},
		{"not on PATH", "lockcheck-no-such-program", "executable file not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := StartCaged(exec.Command(tt.path))
			assert.ErrorContains(t, err, tt.want)
			assert.Empty(t, cagetest.Marked("lockcheck-cage .*"+tt.path))
		})
	}
}

// A stopped cage (a paused client) still ends whole when it is killed.
func TestKillCagedEndsAStoppedCage(t *testing.T) {
	marker := cagetest.Marker()
	cmd := exec.Command(forking, marker, "sleep", "600")
	require.NoError(t, StartCaged(cmd))
	cagetest.AwaitForks(t, marker, 10*time.Second)
	require.NoError(t, syscall.Kill(cmd.Process.Pid, syscall.SIGSTOP))
	KillCaged(cmd.Process.Pid)
	require.Error(t, cmd.Wait())
	cagetest.AssertNoneLeft(t, marker)
}
