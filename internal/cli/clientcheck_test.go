package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/program"
)

// liar is the Redis client of backends/program that lies about its lease
// as mode says ("honest": not at all).
func liar(t *testing.T, mode string) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server")
	}
	return "/usr/bin/python3 ../../backends/program/testdata/liar.py " + mode
}

// client check of a program that lies about its lease on the redis
// topology fails with the rule of the lie named; the same program telling
// no lie conforms.
func TestClientCheckNamesLeaseLies(t *testing.T) {
	cases := []struct{ mode, rule string }{
		{"honest", ""},
		{"overclaim", program.RuleLease},
		{"fakerenew", program.RuleRenewal},
		{"fakeextend", program.RuleRenewal},
		{"wallclock", program.RuleSentNs},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			inv := lockcheck("client", "check", "--client", liar(t, c.mode), "--client-name", "liar-"+c.mode, "--topology", "redis")
			if c.rule == "" {
				assert.Equal(t, exitValid, inv.code, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
				return
			}
			assert.Equal(t, exitInvalid, inv.code, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
			assert.Contains(t, inv.stdout, "(rule: "+c.rule+")")
		})
	}
}

// floodScript answers init, writes its marker file, and then sends
// renewals of a grant it never had, every millisecond, answering no
// request.
const floodScript = `import json, sys, threading, time
marker = sys.argv[1]
def flood():
    i = 0
    while True:
        i += 1
        sys.stdout.write(json.dumps({"type": "renewed", "key": "k", "token": "none-%d" % i, "ttl_ms": 300, "sent_ns": time.monotonic_ns()}) + "\n")
        sys.stdout.flush()
        time.sleep(0.001)
for line in sys.stdin:
    req = json.loads(line)
    if req["type"] == "init":
        sys.stdout.write(json.dumps({"type": "init_ok", "in_reply_to": req["msg_id"], "library": "flood", "version": "0"}) + "\n")
        sys.stdout.flush()
        open(marker + "-" + req["client"], "w").close()
        threading.Thread(target=flood, daemon=True).start()
`

func floodClient(t *testing.T) (command, marker string) {
	t.Helper()
	liar(t, "") // the same needs
	dir := t.TempDir()
	script := filepath.Join(dir, "flood.py")
	require.NoError(t, os.WriteFile(script, []byte(floodScript), 0o644))
	marker = filepath.Join(dir, "started")
	return "/usr/bin/python3 " + script + " " + marker, marker
}

// client check of a program that floods unasked messages and answers no
// request ends within its bound, naming the timeout; on SIGINT it
// ends at once, however long its --op-timeout, and leaves no program
// running.
func TestClientCheckOfAFloodEnds(t *testing.T) {
	t.Run("bound", func(t *testing.T) {
		command, _ := floodClient(t)
		start := time.Now()
		inv := lockcheck("client", "check", "--client", command, "--client-name", "flood", "--topology", "redis", "--client-init-timeout", "2s")
		took := time.Since(start)
		assert.Equal(t, exitInvalid, inv.code, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
		assert.Contains(t, inv.stdout, "no reply to acquire within 1s", "the acquire's own timeout ran out")
		assert.Less(t, took, 20*time.Second, "at most one acquire's bound (2s init + twice the 1s timeout + 0.5s), the starts and the servers'")
	})
	t.Run("SIGINT", func(t *testing.T) {
		command, marker := floodClient(t)
		cmd, stdout, stderr := lockcheckProcess(t, "client", "check", "--client", command, "--client-name", "flood", "--topology", "redis", "--op-timeout", "60s")
		require.Eventually(t, func() bool {
			_, err := os.Stat(marker + "-c1")
			return err == nil
		}, 30*time.Second, 20*time.Millisecond, "the programs started")
		time.Sleep(200 * time.Millisecond) // the check's first acquire is in flight
		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		start := time.Now()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			t.Fatalf("client check went on 5s after SIGINT; stdout:\n%s\nstderr:\n%s", stdout, stderr)
		}
		took := time.Since(start)
		assert.Less(t, took, 2*time.Second, "ends at once on SIGINT")
		assert.Equal(t, exitUnknown, cmd.ProcessState.ExitCode(), "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		assert.Contains(t, stderr.String(), "interrupted")
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(stderr.String()), "\n")+1, "one line: %s", stderr)
		out, _ := exec.Command("pgrep", "-f", marker).Output()
		assert.Empty(t, strings.TrimSpace(string(out)), "no program outlives the check")
	})
}
