package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/internal/testtier"
)

// On Sentinel, client check reads the key's lease on the master the
// sentinels name: redis-py's client made to claim twenty times the lease
// it took fails with the service's PTTL named, the honest one conforms.
func TestClientCheckReadsTheLeaseBehindSentinel(t *testing.T) {
	testtier.Long(t)
	needClientLibraries(t)
	requireSentinel(t)
	dir := t.TempDir()
	for _, f := range []string{"redis-py/plain.py", "python/lockproto.py"} {
		raw, err := os.ReadFile(filepath.Join(clientsDir, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(f)), raw, 0o644))
	}
	raw, err := os.ReadFile(filepath.Join(dir, "plain.py"))
	require.NoError(t, err)
	honest := `return {"token": token, "ttl_ms": self.ttl_ms}`
	require.Contains(t, string(raw), honest)
	liar := strings.Replace(string(raw), honest, `return {"token": token, "ttl_ms": self.ttl_ms * 20}`, 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "overclaim.py"), []byte(liar), 0o644))

	inv := lockcheck("client", "check", "--client", "/usr/bin/python3 "+filepath.Join(dir, "plain.py"), "--topology", "sentinel")
	assert.Equal(t, exitValid, inv.code, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)

	inv = lockcheck("client", "check", "--client", "/usr/bin/python3 "+filepath.Join(dir, "overclaim.py"), "--topology", "sentinel")
	assert.NotEqual(t, exitValid, inv.code)
	assert.Contains(t, inv.stdout+inv.stderr, "left (PTTL)", "the claim is held to the master's key")
}
