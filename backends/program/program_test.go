package program

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
)

// python is Debian's interpreter: the broken clients need no library.
const python = "/usr/bin/python3"

func conformance(t *testing.T, command []string, addrs []string) Conformance {
	dir := t.TempDir()
	prefix := fmt.Sprintf("test-%d:", time.Now().UnixNano())
	return Conformance{
		Keys: [4]string{prefix + "a", prefix + "b", prefix + "c", prefix + "d"},
		TTL:  300 * time.Millisecond, Timeout: 500 * time.Millisecond,
		Open: func(slot string, failpoints []string, fp backends.Failpoint) (*Lock, error) {
			return Open(Options{
				Client:  backends.Client{TTL: 300 * time.Millisecond, Timeout: 500 * time.Millisecond, Failpoint: fp},
				Command: command, Slot: slot, Addrs: addrs, Failpoints: failpoints, InitTimeout: 2 * time.Second,
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
	}
	var wg sync.WaitGroup
	got := make([][]Failure, len(cases))
	for i, c := range cases {
		command := []string{python, script, c.mode}
		if c.mode == "nostart" {
			command = []string{filepath.Join(t.TempDir(), "no-such-client")}
		}
		check := conformance(t, command, nil)
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = check.Check() }()
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

// buildClient builds the Go protocol client of testdata.
func buildClient(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "goclient")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/goclient").CombinedOutput()
	require.NoError(tb, err, string(out))
	return bin
}

// The Go client with its watchdog conforms, reports its renewals, stops at
// its declared failpoint, and maps the lock's replies onto backends.Lock.
func TestGoodClient(t *testing.T) {
	addr := startRedis(t)
	bin := buildClient(t)
	fails := conformance(t, []string{bin, "-watchdog"}, []string{addr}).Check()
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
}

func TestSplitLines(t *testing.T) {
	// A Violation is one line whatever the client wrote.
	v := &Violation{Slot: "c0", Line: cut(strings.Repeat("x", 500)), Rule: RuleJSON, Detail: "bad"}
	assert.NotContains(t, v.Error(), "\n")
	assert.Less(t, len(v.Error()), 300)
}
