package catalog

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// initEcho is a lock client program that writes its init line to the file
// its argument names and answers init_ok.
const initEcho = `import json, sys
line = sys.stdin.readline()
open(sys.argv[1], "w").write(line)
print(json.dumps({"type": "init_ok", "in_reply_to": json.loads(line)["msg_id"], "library": "echo", "version": "1"}), flush=True)
sys.stdin.read()
`

// A client program on the sentinel topology is told the master's name in
// init (settings.sentinel_master), whether the spec carries its options
// (a run's workers) or not (the lock opened from its registration), beside
// the run's params.
func TestClientProgramInitCarriesTheTopologysSettings(t *testing.T) {
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("no " + python)
	}
	got := filepath.Join(t.TempDir(), "init.json")
	const name = "test-sentinel-client"
	b, err := ClientTarget(name, ClientProgram{Command: []string{python, "-c", initEcho, got}, Topology: "sentinel"})
	require.NoError(t, err)
	_, registered := registry[name]
	require.False(t, registered, "a lock client program is never written into the registry")
	require.Equal(t, "lockcheck", b.Client.Settings["sentinel_master"])

	spec := Spec{Backend: name, Variant: ClientVariant, Addrs: []string{"127.0.0.1:1"}, TTL: time.Second, Timeout: time.Second,
		Extra: map[string]string{"down-after": "1s"}}
	withOptions, o := spec, b.Client.Options(name)
	withOptions.Program = &o
	for what, s := range map[string]Spec{"from its registration": spec, "from the spec's options": withOptions} {
		t.Run(what, func(t *testing.T) {
			l, err := b.Open(s, nil)
			require.NoError(t, err)
			require.NoError(t, l.Close())
			raw, err := os.ReadFile(got)
			require.NoError(t, err)
			var init struct {
				Settings map[string]string `json:"settings"`
			}
			require.NoError(t, json.Unmarshal(raw, &init))
			assert.Equal(t, map[string]string{"sentinel_master": "lockcheck", "down-after": "1s"}, init.Settings)
		})
	}
}
