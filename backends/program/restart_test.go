package program

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
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
