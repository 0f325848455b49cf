package spawn

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const helperEnv = "SPAWN_TEST_PARENT"

// TestMain runs the test binary as the parent of TestChildDiesWithItsParent
// when helperEnv is set: it starts a child through Start, prints the
// child's pid and waits to be killed.
func TestMain(m *testing.M) {
	if marker := os.Getenv(cagedParentEnv); marker != "" {
		caged := exec.Command(forking, marker, "sleep", "600")
		if err := StartCaged(caged); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(caged.Process.Pid)
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	if os.Getenv(helperEnv) == "1" {
		child := exec.Command("sleep", "60")
		if err := Start(child, true); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(child.Process.Pid)
		// Idle goroutines may retire threads meanwhile: the signal must
		// still wait for the process, not the thread, to die.
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestStartPutsTheChildInTheGroupAsked(t *testing.T) {
	tests := []struct {
		name     string
		ownGroup bool
	}{
		{"a node or a worker leads a group of its own", true},
		{"a lock client program stays in its worker's group", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("sleep", "60")
			require.NoError(t, Start(cmd, tt.ownGroup))
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			pgid, err := syscall.Getpgid(cmd.Process.Pid)
			require.NoError(t, err)
			if tt.ownGroup {
				assert.Equal(t, cmd.Process.Pid, pgid)
			} else {
				assert.Equal(t, syscall.Getpgrp(), pgid)
			}
		})
	}
}

func TestStartReportsAProgramThatCannotStart(t *testing.T) {
	err := Start(exec.Command("/nonexistent/lockcheck-no-such-program"), true)
	assert.ErrorContains(t, err, "no such file or directory")
}

// A child started through Start gets SIGKILL when its parent dies, even
// by SIGKILL, which no cleanup of the parent's can catch.
func TestChildDiesWithItsParent(t *testing.T) {
	parent := exec.Command(os.Args[0], "-test.run", "^$")
	parent.Env = append(os.Environ(), helperEnv+"=1")
	out, err := parent.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, parent.Start())
	t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err, "the parent printed %q", line)
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })

	require.NoError(t, syscall.Kill(child, 0), "the child runs while its parent does")
	require.NoError(t, parent.Process.Kill())
	_ = parent.Wait()
	assert.Eventually(t, func() bool { return dead(child) }, 10*time.Second, 10*time.Millisecond,
		"the child outlived its parent")
}

// dead says whether a process is gone or a zombie: the orphan is reaped by
// whatever adopts it, which may be slow to (or never) wait for it.
func dead(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	return strings.HasPrefix(strings.TrimSpace(rest), "Z")
}
