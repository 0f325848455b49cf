package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A scenario whose program passes the harness's probe and then dies in
// init, or never answers it, in every worker ends within its init timeout
// plus 30 s, exit 2, with one line that quotes the program's last stderr
// line, and leaves no program running (the run used to hang for good when
// a worker was replaced while the fleet stopped).
func TestScenarioWhoseProgramMissesInitEnds(t *testing.T) {
	requireRedisServer(t)
	script, err := filepath.Abs("../../backends/program/testdata/broken.py")
	require.NoError(t, err)
	for _, c := range []struct{ mode, line string }{
		{"dieinit", `ModuleNotFoundError: No module named 'nosuchlib'`},
		{"hanginit", `connecting to redis at 127.0.0.1:1...`},
	} {
		t.Run(c.mode, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, "probed")
			scn := filepath.Join(dir, "s.yaml")
			require.NoError(t, os.WriteFile(scn, []byte(`name: misses-init
title: A program that answers the probe and no init after it
client: {command: "/usr/bin/python3 '`+script+`' `+c.mode+` '`+marker+`'", topology: redis, name: missesinit-`+c.mode+`, init_timeout: 20s}
workload: unfenced
ttl: 500ms
clients: 5
time_limit: 3s
expect:
  verdict: "true"
`), 0o644))
			const initTimeout = 2 * time.Second
			start := time.Now()
			inv := lockcheck("scenario", "run", "--file", scn, "--client-init-timeout", initTimeout.String(), "--out", filepath.Join(dir, "store"))
			took := time.Since(start)
			t.Logf("after %s: %s", took.Round(time.Millisecond), inv.stderr)
			assert.Equal(t, exitUnknown, inv.code, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
			assert.Less(t, took, initTimeout+30*time.Second, "the run ends within the init timeout plus 30s (not the scenario's 20s)")
			assert.Contains(t, inv.stderr, "did not start")
			assert.Contains(t, inv.stderr, c.line, "the program's last stderr line is quoted")
			assert.Equal(t, 1, strings.Count(strings.TrimSpace(inv.stderr), "\n")+1, "one line: %s", inv.stderr)
			assert.Empty(t, processesWith(marker), "no program is left running")
		})
	}
}

// processesWith lists the live processes whose command line holds s.
func processesWith(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(raw), s) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(raw), "\x00", " "))
		}
	}
	return out
}
