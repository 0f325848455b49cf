package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/program"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
)

// hostileScript is package program's hostile test client, for a long test.
func hostileScript(t *testing.T) string {
	t.Helper()
	testtier.Long(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "backends", "program", "testdata", "hostile.py"))
	require.NoError(t, err)
	return script
}

// A lock client program that breaks the protocol where a break used to
// pass unseen (after a reply, in an unasked message, in a number or a
// string the decoder took as it came) makes lockcheck run, as a process of
// its own against a single Redis, end unknown with the rule named in
// stdout, the verdict's reason, results.json and the report.
func TestHostileClientProgramIsUnknown(t *testing.T) {
	script := hostileScript(t)
	for _, c := range []struct {
		mode, rule, detail string
		// inFlight: the break ends the operation in flight, which is
		// info under the process the break is recorded for.
		inFlight bool
	}{
		{"dupreply", program.RuleReply, "which is no request outstanding", false},
		{"fpflood", program.RuleAimed, `failpoint \"before-renew\", which init did not aim at`, true},
		{"ttl584y", program.RuleRange, "ttl_ms 18446744074210 is out of its range", true},
		{"badutf8", program.RuleUTF8, "not valid UTF-8", true},
	} {
		t.Run(c.mode, func(t *testing.T) {
			store := t.TempDir()
			// One client: the program's lock is its own, in memory.
			cmd, stdout, stderr := lockcheckProcess(t, "run", "--client", "/usr/bin/python3 "+script+" "+c.mode, "--client-name", "hostile",
				"--topology", "redis", "--clients", "1", "--nemesis", "none", "--time-limit", "2s", "--out", store)
			code := exitCode(t, cmd)
			require.Equal(t, exitUnknown, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			assert.Contains(t, stdout.String(), "client broke the protocol: ")
			assert.LessOrEqual(t, strings.Count(stdout.String(), "client broke the protocol: "), 4, "the first 3 and a count of the rest")
			assert.Contains(t, stdout.String(), "(rule: "+c.rule+")")
			dir := filepath.Join(store, "latest")
			res := readResults(t, dir)
			assert.Contains(t, res.Reason, "(rule: "+c.rule+")")
			require.NotEmpty(t, res.ClientViolations)
			assert.Equal(t, c.rule, res.ClientViolations[0].Rule)
			raw, err := os.ReadFile(filepath.Join(dir, results.ResultsFile))
			require.NoError(t, err)
			assert.Contains(t, string(raw), `"client_violations"`)
			assert.Contains(t, string(raw), c.detail)
			if c.inFlight {
				h, err := history.ReadFile(filepath.Join(dir, results.HistoryFile))
				require.NoError(t, err)
				ended := map[string]bool{}
				for _, e := range h.Events {
					if e.Type == history.Info && e.Process != history.Nemesis && strings.Contains(e.Error, c.rule) {
						ended[e.Process.String()] = true
					}
				}
				for _, v := range res.ClientViolations {
					assert.True(t, ended[v.Client], "%s's break is recorded under the process whose operation it ended", v.Client)
				}
			}
			page, err := os.ReadFile(filepath.Join(dir, results.ReportFile))
			require.NoError(t, err)
			assert.Contains(t, string(page), "client broke the protocol")
		})
	}
}

// A lost sent in the same write as its acquire_ok counts: every grant is
// lost at once, so the client writes nothing (docs/clients.md), and every
// release says so.
func TestLostWithTheGrantSkipsTheWrite(t *testing.T) {
	script := hostileScript(t)
	store := t.TempDir()
	cmd, stdout, stderr := lockcheckProcess(t, "run", "--client", "/usr/bin/python3 "+script+" lostwithgrant", "--client-name", "hostile",
		"--topology", "redis", "--clients", "1", "--nemesis", "none", "--time-limit", "2s", "--out", store)
	exitCode(t, cmd)
	h, err := history.ReadFile(filepath.Join(store, "latest", results.HistoryFile))
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	var grants, lost, writes, lostReleases int
	for _, e := range h.Events {
		switch {
		case e.F == history.FAcquire && e.Type == history.OK:
			grants++
		case e.F == history.NemLockLost:
			lost++
		case e.F == history.FWrite && e.Type == history.Invoke:
			writes++
		case e.F == history.FRelease && e.Type == history.Invoke && e.Value != nil && e.Value.Detail == "lease lost":
			lostReleases++
		}
	}
	require.Positive(t, grants, "stdout:\n%s", stdout)
	assert.Equal(t, grants, lost, "every lost is recorded")
	assert.Zero(t, writes, "no client wrote under a grant its library said was lost")
	assert.Equal(t, grants, lostReleases, "every release says the lease was lost")
}
