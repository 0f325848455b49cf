package program

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// restartScript is a client that keeps an in-memory lock and, once started
// again (init's process above 0: the check kills it after a timeout),
// either fails every acquire (error 13) or never answers init.
const restartScript = `import json, sys, time
mode, n, process = sys.argv[1], 0, 0
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    req = json.loads(line)
    t, mid = req["type"], req.get("msg_id")
    if t == "init":
        process = req["process"]
        if process > 0 and mode == "noinit":
            time.sleep(60)
        send({"type": "init_ok", "in_reply_to": mid, "library": "restart-" + mode, "version": "0"})
    elif t == "acquire" and process > 0 and mode == "acquirefails":
        send({"type": "error", "in_reply_to": mid, "code": 13, "text": "the library crashed"})
    elif t == "acquire":
        n += 1
        send({"type": "acquire_ok", "in_reply_to": mid, "token": "%d-%d" % (process, n), "ttl_ms": 300})
    elif t == "release":
        send({"type": "release_ok", "in_reply_to": mid, "deleted": True})
`

// The check names the rule a client broke after its restart: one that did
// not start again broke "starts again and answers init"; one that started
// again and answered init, and whose acquire then failed, broke the
// grant's rule, never the restart's.
func TestCheckNamesTheRuleBrokenAfterARestart(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skip("no " + python)
	}
	script := filepath.Join(t.TempDir(), "restart.py")
	if err := os.WriteFile(script, []byte(restartScript), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		mode, rule, not string
	}{
		{mode: "acquirefails", rule: RuleGrant, not: RuleRestart},
		{mode: "noinit", rule: RuleRestart, not: RuleGrant},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			var rules []string
			fails := conformance(t, []string{python, script, tt.mode}, nil).Check(bg)
			for _, f := range fails {
				rules = append(rules, f.Rule)
				if f.Rule == tt.rule && tt.rule == RuleGrant {
					assert.Contains(t, f.Detail, "started again", "the line says the restart went well")
				}
			}
			assert.Contains(t, rules, tt.rule, "%v", fails)
			assert.NotContains(t, rules, tt.not)
		})
	}
}

// slowRestartScript never answers its first acquire (the lock kills it
// after the timeout) and, started again, takes 600 ms over init, as an
// interpreter importing a library does.
const slowRestartScript = `import json, sys, time
process = 0
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    req = json.loads(line)
    t, mid = req["type"], req.get("msg_id")
    if t == "init":
        process = req["process"]
        if process > 0:
            time.sleep(0.6)
        send({"type": "init_ok", "in_reply_to": mid, "library": "slow-restart", "version": "0"})
    elif t == "acquire" and process == 0:
        time.sleep(60)
    elif t == "acquire":
        send({"type": "acquire_ok", "in_reply_to": mid, "token": "t%d" % process, "ttl_ms": 300})
    elif t == "release":
        send({"type": "release_ok", "in_reply_to": mid, "deleted": True})
`

// Start brings a killed program up again and says how long that took, so
// that the next acquire's latency holds none of it; a running program's
// Start takes nothing.
func TestStartRestartsAKilledProgramBeforeTheRequest(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skip("no " + python)
	}
	script := filepath.Join(t.TempDir(), "slow.py")
	require.NoError(t, os.WriteFile(script, []byte(slowRestartScript), 0o644))
	l, err := Open(Options{Client: backends.Client{TTL: 300 * time.Millisecond, Timeout: 300 * time.Millisecond},
		Command: []string{python, script}, Slot: "c0", Stride: 5})
	require.NoError(t, err)
	defer l.Close()
	took, err := l.Start(context.Background())
	require.NoError(t, err)
	assert.Zero(t, took, "running: nothing to start")
	_, err = l.Acquire(context.Background(), "k")
	require.Error(t, err, "no reply within the timeout: the program is killed")
	took, err = l.Start(context.Background())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, took, 600*time.Millisecond, "the restart and its init")
	began := time.Now()
	g, err := l.Acquire(context.Background(), "k")
	require.NoError(t, err)
	assert.Equal(t, "t5", g.Token, "the program's next process")
	assert.Less(t, time.Since(began), 500*time.Millisecond, "the acquire waits for no restart")
}
