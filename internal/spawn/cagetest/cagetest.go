// Package cagetest holds what the tests of a caged program share: the
// hostile program that forks, setsids and double-forks, and the checks
// that its processes ran and are all gone.
package cagetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Forking is the path of backends/program/testdata/forking.sh: run as
// "forking.sh MARKER COMMAND...", it leaves MARKER-fork and MARKER-setsid
// sleepers behind and becomes COMMAND.
func Forking() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "..", "backends", "program", "testdata", "forking.sh")
}

// Marker is a marker no other test's processes hold.
func Marker() string {
	return fmt.Sprintf("lockcheck-cage-test-%d-%d", os.Getpid(), time.Now().UnixNano())
}

// Marked lists the live processes whose command line holds marker, as
// "pid cmdline" lines.
func Marked(marker string) []string {
	out, _ := exec.Command("pgrep", "-af", marker).Output()
	var found []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// Another pgrep of the same marker, still running, is no leftover.
		if fields := strings.Fields(line); len(fields) > 1 && fields[1] != "pgrep" {
			found = append(found, line)
		}
	}
	return found
}

// AwaitForks waits until both sleepers of Forking run: the shell starts
// them while the program it becomes already runs.
func AwaitForks(t *testing.T, marker string, timeout time.Duration) {
	t.Helper()
	for _, m := range []string{marker + "-fork", marker + "-setsid"} {
		require.Eventually(t, func() bool { return len(Marked(m)) > 0 }, timeout, 10*time.Millisecond,
			"forking started no %s", m)
	}
}

// AssertNoneLeft asserts that every process marked with marker is gone
// (within a few seconds: a cage ends in a sweep), and kills what a failed
// test left.
func AssertNoneLeft(t *testing.T, marker string) {
	t.Helper()
	t.Cleanup(func() { exec.Command("pkill", "-KILL", "-f", marker).Run() }) //nolint:errcheck // none is the good case
	assert.Eventually(t, func() bool { return len(Marked(marker)) == 0 }, 15*time.Second, 20*time.Millisecond,
		"processes outlived their cage")
	assert.Empty(t, Marked(marker), "pgrep -af %s", marker)
}
