package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
)

// mainEnv makes the test binary run lockcheck's main with its arguments.
const mainEnv = "LOCKCHECK_TEST_MAIN"

// lockcheckProcess is lockcheck as a process of its own (the test binary
// running main), so that a test can signal it and read its real stderr.
func lockcheckProcess(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill() //nolint:errcheck // gone already is fine
			cmd.Wait()         //nolint:errcheck // killed above
		}
	})
	return cmd, &stdout, &stderr
}

func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	return ee.ExitCode()
}

// waitForGrants waits until the run in store has recorded a few grants.
func waitForGrants(t *testing.T, store string) string {
	t.Helper()
	var dir string
	require.Eventually(t, func() bool {
		d, err := filepath.EvalSymlinks(filepath.Join(store, "latest"))
		if err != nil {
			return false
		}
		b, err := os.ReadFile(filepath.Join(d, results.HistoryFile))
		dir = d
		return err == nil && bytes.Count(b, []byte(`"type":"ok","f":"acquire"`)) >= 5
	}, 90*time.Second, 100*time.Millisecond, "the run grants the lock")
	return dir
}

// processesUsing lists live processes with a file open under dir.
func processesUsing(dir string) []string {
	var out []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name()))
			if err == nil && strings.HasPrefix(target, dir+"/") {
				cmdline, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
				out = append(out, p.Name()+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
				break
			}
		}
	}
	return out
}

// readJSON reads results.json as plain JSON, to see its keys as CI does.
func readJSON(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, results.ResultsFile))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

// junitRunCase returns how junit.xml's "run" test case ended.
func junitRunCase(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, results.JUnitFile))
	require.NoError(t, err)
	s := string(b)
	i := strings.Index(s, `<testcase name="run"`)
	require.GreaterOrEqual(t, i, 0, "junit.xml has a run test case:\n%s", s)
	rest := s[i:]
	rest = rest[:strings.Index(rest, "</testcase>")]
	switch {
	case strings.Contains(rest, "<failure"):
		return "failure"
	case strings.Contains(rest, "<error"):
		return "error"
	}
	return "pass"
}

// A run stopped by SIGINT or killed by SIGKILL never reads as a pass:
// results.json says interrupted or incomplete, junit.xml has an erroring
// run case, and lockcheck check of its directory exits 2 as the run did.
func TestInterruptedAndKilledRunsAreUnknown(t *testing.T) {
	testtier.Long(t)
	requireRedisServer(t)
	for _, tt := range []struct {
		name   string
		signal syscall.Signal
	}{
		{"SIGINT", syscall.SIGINT},
		{"SIGKILL", syscall.SIGKILL},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := t.TempDir()
			cmd, stdout, stderr := lockcheckProcess(t, "run", "--out", store, "--seed", "1", "--workload", "fenced",
				"--nemesis", "none", "--time-limit", "5m")
			dir := waitForGrants(t, store)
			require.NoError(t, cmd.Process.Signal(tt.signal))
			code := exitCode(t, cmd)
			if tt.signal == syscall.SIGINT {
				assert.Equal(t, exitUnknown, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
				m := readJSON(t, dir)
				assert.Equal(t, "unknown", m["valid"])
				assert.Equal(t, true, m["interrupted"])
				assert.Equal(t, false, m["incomplete"])
				assert.Equal(t, "error", junitRunCase(t, dir))
				assert.Contains(t, stdout.String(), "This run was interrupted")
			} else {
				assert.Equal(t, -1, code, "killed")
				_, err := os.Stat(filepath.Join(dir, results.ResultsFile))
				assert.ErrorIs(t, err, os.ErrNotExist, "a killed run checked nothing")
			}
			assert.Eventually(t, func() bool { return len(processesUsing(store)) == 0 }, 20*time.Second, 100*time.Millisecond,
				"no server or worker outlives lockcheck: %v", processesUsing(store))

			again := lockcheck("check", dir)
			assert.Equal(t, exitUnknown, again.code, again.stdout+again.stderr)
			res, err := results.ReadResults(dir)
			require.NoError(t, err)
			assert.Equal(t, checker.Unknown, res.Valid)
			assert.Equal(t, tt.signal == syscall.SIGINT, res.Interrupted)
			assert.Equal(t, tt.signal == syscall.SIGKILL, res.Incomplete)
			assert.Equal(t, "error", junitRunCase(t, dir))
		})
	}
}

// On a full disk the run stops at the first failed write, says so in one
// line, and exits 2; once there is room again, its directory checks to
// unknown.
func TestDiskFullStopsTheRun(t *testing.T) {
	testtier.Long(t)
	requireRedisServer(t)
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	store := t.TempDir()
	require.NoError(t, exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", store).Run())
	t.Cleanup(func() {
		out, err := exec.Command("umount", store).CombinedOutput()
		assert.NoError(t, err, "%s", out)
	})
	cmd, stdout, stderr := lockcheckProcess(t, "run", "--out", store, "--seed", "1", "--workload", "fenced",
		"--nemesis", "none", "--time-limit", "5m")
	code := exitCode(t, cmd)
	assert.Equal(t, exitUnknown, code)
	var lines []string // stderr less the progress lines a run prints off a terminal
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if !strings.HasPrefix(l, "progress: ") {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, 1, "one error line, not one per lost event:\n%s\nstdout:\n%s", stderr, stdout)
	assert.Regexp(t, `^lockcheck: recording (history|resource)\.jsonl failed: .*no space left on device; the run stopped there`, lines[0])
	assert.Eventually(t, func() bool { return len(processesUsing(store)) == 0 }, 20*time.Second, 100*time.Millisecond,
		"no server or worker outlives the run: %v", processesUsing(store))

	// With room again, what was recorded checks to unknown.
	require.NoError(t, exec.Command("mount", "-o", "remount,size=16m", store).Run())
	dir, err := results.OpenRunDir(filepath.Join(store, "latest"))
	require.NoError(t, err)
	again := lockcheck("check", dir)
	assert.Equal(t, exitUnknown, again.code, again.stdout+again.stderr)
	res, err := results.ReadResults(dir)
	require.NoError(t, err)
	assert.Equal(t, checker.Unknown, res.Valid)
	assert.True(t, res.Interrupted || res.Incomplete)
}

func requireRedisServer(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed (run scripts/setup): %v", err)
	}
}

// A run that tested nothing is unknown, never a pass: no acquire could
// finish in time, or the nemesis asked for never struck.
func TestRunsThatTestedNothingAreUnknown(t *testing.T) {
	t.Parallel()
	requireRedisServer(t)
	for _, tt := range []struct {
		name   string
		args   []string
		reason string
	}{
		{"no grant", []string{"--op-timeout", "1us", "--nemesis", "none"}, "No client was ever granted the lock"},
		{"no fault", []string{"--nemesis", "pause-holder", "--nemesis-interval", "10m"}, "the nemesis was asked for pause-holder but injected no fault"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := t.TempDir()
			inv := lockcheck(append([]string{"run", "--out", store, "--seed", "1", "--time-limit", "3s"}, tt.args...)...)
			assert.Equal(t, exitUnknown, inv.code, inv.stdout+inv.stderr)
			res, err := results.ReadResults(filepath.Join(store, "latest"))
			require.NoError(t, err)
			assert.Equal(t, checker.Unknown, res.Valid)
			assert.Contains(t, res.Reason, tt.reason)
			assert.Contains(t, strings.Join(res.UnknownReasons, " "), tt.reason)
		})
	}
}

// Every duration and count flag is checked before anything starts: one
// line naming the flag and what it accepts, exit 2, nothing recorded.
func TestNegativeDurationsAreRefused(t *testing.T) {
	store := t.TempDir()
	var tests []badInput
	for _, tt := range []struct{ flag, want string }{
		{"--op-timeout=-1s", "--op-timeout=-1s: must be a positive duration"},
		{"--pause=-1s", `"-1s" for "--pause" flag: "-1s" is not a duration`},
		{"--pause=1ms", "--pause=1ms: must be at least 10ms"},
		{"--nemesis-interval=-1s", "--nemesis-interval=-1s: must be at least 100ms"},
		{"--retry=-1s", "--retry=-1s: must be a positive duration"},
		{"--linearizability-timeout=-1s", "--linearizability-timeout=-1s: must be a positive duration"},
		{"--ttl=-500ms", "--ttl=-500ms: must be at least 1ms"},
		{"--ttl=1ns", "--ttl=1ns: must be at least 1ms: a lock service grants leases in whole milliseconds"},
		{"--time-limit=1ns", "--time-limit=1ns: must be at least the TTL (--ttl 500ms): a run shorter than one lease"},
		{"--clients=100000", "--clients=100000: must be at most "},
		{"--time-limit=0s", "--time-limit=0s: must be a positive duration"},
		{"--clients=-2", "--clients=-2: must be at least 1"},
		{"--keys=0", "--keys=0: must be at least 1"},
		{"--restart-delay=-1s", "--restart-delay=-1s: must not be negative"},
		{"--down-after=-1s", "--down-after=-1s: must not be negative"},
	} {
		tests = append(tests,
			badInput{"run " + tt.flag, []string{"run", "--out", store, tt.flag}, tt.want},
			badInput{"compare " + tt.flag, []string{"compare", "--out", store, tt.flag}, tt.want})
	}
	tests = append(tests, badInput{"check --linearizability-timeout=-1s", []string{"check", "--linearizability-timeout=-1s", store}, "must be a positive duration"})
	assertRefused(t, store, nil, tests)
}

// Ctrl-C while the servers start says so, in one line, and nothing else.
func TestInterruptDuringStartUpIsOneLine(t *testing.T) {
	testtier.Long(t)
	requireRedisServer(t)
	store := t.TempDir()
	cmd, stdout, stderr := lockcheckProcess(t, "run", "--out", store, "--seed", "1", "--backend", "sentinel", "--nemesis", "none")
	require.Eventually(t, func() bool {
		entries, _ := filepath.Glob(filepath.Join(store, "*", "nodes", "*"))
		return len(entries) > 0
	}, 30*time.Second, time.Millisecond, "the run starts its nodes")
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	assert.Equal(t, exitUnknown, exitCode(t, cmd))
	assert.Regexp(t, `^lockcheck: interrupted while starting [^\n]+\n$`, stderr.String(), "stdout:\n%s", stdout)
	assert.Eventually(t, func() bool { return len(processesUsing(store)) == 0 }, 20*time.Second, 100*time.Millisecond,
		"no server outlives the run: %v", processesUsing(store))
}
