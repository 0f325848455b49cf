package program

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/history"
)

// bg is the context of the tests' operations and checks.
var bg = context.Background()

// python is Debian's interpreter: the broken clients need no library.
const python = "/usr/bin/python3"

func conformance(t *testing.T, command []string, addrs []string) Conformance {
	return conformanceIn(t.TempDir(), command, addrs)
}

// conformanceIn is conformance with the programs' stderr logs in dir.
func conformanceIn(dir string, command []string, addrs []string) Conformance {
	return conformanceWith(dir, command, addrs, 2*time.Second)
}

// conformanceWith is conformanceIn with the programs' init timeout.
func conformanceWith(dir string, command []string, addrs []string, initTimeout time.Duration) Conformance {
	prefix := fmt.Sprintf("test-%d:", time.Now().UnixNano())
	return Conformance{
		Keys: [4]string{prefix + "a", prefix + "b", prefix + "c", prefix + "d"},
		TTL:  300 * time.Millisecond, Timeout: 500 * time.Millisecond,
		Open: func(slot string, failpoints []string, fp backends.Failpoint) (*Lock, error) {
			return Open(Options{
				Client:  backends.Client{TTL: 300 * time.Millisecond, Timeout: 500 * time.Millisecond, Failpoint: fp},
				Command: command, Slot: slot, Addrs: addrs, Failpoints: failpoints, InitTimeout: initTimeout,
				LogPath: filepath.Join(dir, slot+".log"),
			})
		},
	}
}

// Every broken client fails the check with a line naming the rule it
// breaks, fast: none of them needs a server.
func TestCheckFailsBrokenClients(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skip("no " + python)
	}
	script := filepath.Join("testdata", "broken.py")
	cases := []struct {
		mode, rule string
	}{
		{"noinit", RuleInit},
		{"notjson", RuleJSON},
		{"unknowntype", RuleType},
		{"noreq", RuleReply},
		{"missingfield", RuleField},
		{"crash", RuleExit},
		{"flood", RuleStderr},
		{"nostart", RuleStart},
		{"sametoken", RuleNewGrant},
	}
	var wg sync.WaitGroup
	got := make([][]Failure, len(cases))
	logs := make([]string, len(cases))
	for i, c := range cases {
		command := []string{python, script, c.mode}
		if c.mode == "nostart" {
			command = []string{filepath.Join(t.TempDir(), "no-such-client")}
		}
		logs[i] = t.TempDir()
		check := conformanceIn(logs[i], command, nil)
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = check.Check(bg) }()
	}
	wg.Wait()
	for i, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			var rules []string
			for _, f := range got[i] {
				rules = append(rules, f.Rule)
				assert.NotContains(t, f.String(), "\n", "one line per failure")
			}
			assert.Contains(t, rules, c.rule, "failures: %v", got[i])
			files, _ := filepath.Glob(filepath.Join(logs[i], "*.log"))
			for _, f := range files {
				st, err := os.Stat(f)
				require.NoError(t, err)
				assert.LessOrEqual(t, st.Size(), int64(2*StderrKeep+4096), "a stderr log keeps the first and last MiB only")
			}
		})
	}
}

// startRedis starts a redis-server on a free port for the test.
func startRedis(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		require.Less(t, i, 100, "redis-server did not listen")
		time.Sleep(20 * time.Millisecond)
	}
}

// buildClient builds the Go reference client, examples/clients/go (a
// module of its own: built in its folder).
func buildClient(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "goclient")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..", "examples", "clients", "go")
	out, err := build.CombinedOutput()
	require.NoError(tb, err, string(out))
	return bin
}

// The Go client with its watchdog conforms, reports its renewals, stops at
// its declared failpoint, and maps the lock's replies onto backends.Lock.
func TestGoodClient(t *testing.T) {
	addr := startRedis(t)
	bin := buildClient(t)
	fails := conformance(t, []string{bin, "-watchdog"}, []string{addr}).Check(bg)
	assert.Empty(t, fails)

	var (
		mu      sync.Mutex
		reports []backends.Report
	)
	c := conformance(t, []string{bin, "-watchdog"}, []string{addr})
	l, err := c.Open("c9", nil, nil)
	require.NoError(t, err)
	defer l.Close()
	l.Reports(func(r backends.Report) { mu.Lock(); reports = append(reports, r); mu.Unlock() })
	g, err := l.Acquire(bg, c.Keys[0])
	require.NoError(t, err)
	assert.Equal(t, 300*time.Millisecond, g.TTL)
	require.NotNil(t, g.Fence)
	time.Sleep(250 * time.Millisecond)
	deleted, err := l.Release(bg, c.Keys[0], g)
	require.NoError(t, err)
	assert.True(t, deleted)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, reports, "the watchdog renewed within the lease")
	assert.Equal(t, g.Token, reports[0].Token)
	assert.False(t, reports[0].Lost)
	assert.Positive(t, reports[0].Sent, "a renewal says when it was sent (sent_ns)")
	assert.Less(t, reports[0].Sent, history.Now(), "on CLOCK_MONOTONIC")
}

func TestSplitLines(t *testing.T) {
	// A Violation is one line whatever the client wrote.
	v := &Violation{Slot: "c0", Line: cut(strings.Repeat("x", 500)), Rule: RuleJSON, Detail: "bad"}
	assert.NotContains(t, v.Error(), "\n")
	assert.Less(t, len(v.Error()), 300)
}

// A client that breaks a rule mid-run ends the operation in flight with
// an unknown outcome naming the rule (the loop records info), and the next
// operation starts it again with a new init.
func TestMidRunViolationRestarts(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skip("no " + python)
	}
	for _, c := range []struct{ mode, rule string }{{"crash", RuleExit}, {"unknowntype", RuleType}, {"missingfield", RuleField}} {
		t.Run(c.mode, func(t *testing.T) {
			l, err := conformance(t, []string{python, filepath.Join("testdata", "broken.py"), c.mode}, nil).Open("c0", nil, nil)
			require.NoError(t, err)
			defer l.Close()
			for range 2 {
				_, err := l.Acquire(bg, "k")
				var v *Violation
				require.ErrorAs(t, err, &v)
				assert.Equal(t, c.rule, v.Rule)
				assert.NotErrorIs(t, err, backends.ErrNotAcquired, "an unknown outcome, not a refusal")
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			assert.GreaterOrEqual(t, l.started, 2, "the client was started again")
		})
	}
}

// A client that dies between operations makes the next operation an
// unknown outcome (what the library held died with it), once.
func TestDeathBetweenOperations(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skip("no " + python)
	}
	l, err := conformance(t, []string{python, filepath.Join("testdata", "broken.py"), "good"}, nil).Open("c0", nil, nil)
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Acquire(bg, "k")
	require.NoError(t, err)
	l.mu.Lock()
	l.cur.signal(syscall.SIGKILL)
	l.mu.Unlock()
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.died != nil
	}, 2*time.Second, 10*time.Millisecond)
	_, err = l.Acquire(bg, "k2")
	var v *Violation
	require.ErrorAs(t, err, &v)
	assert.Equal(t, RuleExit, v.Rule)
	_, err = l.Acquire(bg, "k3")
	assert.NoError(t, err, "started again")
}

// A program that dies in init, or never answers it, is refused with the
// last line it wrote to its stderr: for a missing module, the one line
// its user needs.
func TestFailedInitQuotesTheLastStderrLine(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skip("no " + python)
	}
	for _, mode := range []struct{ name, line string }{
		{"dieinit", `ModuleNotFoundError: No module named 'nosuchlib'`},
		{"hanginit", `connecting to redis at 127.0.0.1:1...`},
	} {
		t.Run(mode.name, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "started")
			require.NoError(t, os.WriteFile(marker, nil, 0o644)) // not the first start
			_, err := Open(Options{
				Command: []string{python, filepath.Join("testdata", "broken.py"), mode.name, marker},
				Slot:    "c0", InitTimeout: time.Second, LogPath: filepath.Join(t.TempDir(), "c0.log"),
			})
			var v *Violation
			require.ErrorAs(t, err, &v)
			assert.Contains(t, v.Error(), fmt.Sprintf("its last line on stderr: %q", mode.line))
		})
	}
}
