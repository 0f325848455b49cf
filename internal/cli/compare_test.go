package cli

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
)

// plan lays out the cells compare would run for args, without running any.
func plan(t *testing.T, args ...string) []cell {
	t.Helper()
	cmd, f := compareCommand()
	require.NoError(t, cmd.ParseFlags(append([]string{"--seed", "1"}, args...)))
	cells, err := f.plan(cmd)
	require.NoError(t, err)
	return cells
}

func TestCompareDefaultsCoverEveryBackend(t *testing.T) {
	cells := plan(t)
	got := map[string]bool{}
	for _, c := range cells {
		got[c.Backend+" "+c.Workload+" "+results.FaultsName(c.Nemesis)] = true
		assert.Equal(t, defaultCellLimit, c.cfg.Limit)
	}
	for _, name := range catalog.Names() {
		b, _, err := catalog.Lookup(name, "")
		require.NoError(t, err)
		for _, w := range []string{"fenced", "unfenced"} {
			for _, faults := range []string{"none", results.FaultsName(backendFaults(b))} {
				assert.True(t, got[name+" "+w+" "+faults], "the defaults run %s %s %s", name, w, faults)
			}
		}
	}
	assert.Len(t, cells, 4*len(catalog.Names()))
}

func TestCompareSkipsWhatMakesNoSense(t *testing.T) {
	cells := plan(t, "--backends", "redis,redis/setnx-expire", "--workloads", "unfenced",
		"--nemesis", "none,kill-client,pause-nodes,pause-leader,signature")
	got := map[string]string{}
	for _, c := range cells {
		got[c.Variant+" "+results.FaultsName(c.Nemesis)] = c.Status + " " + c.Why
	}
	for _, tc := range []struct{ cell, want string }{
		{"correct none", " "},
		{"correct pause-holder", " "},
		{"correct kill-client", " "}, // it kills the holder before its write
		{"setnx-expire kill-client", " "},
		{"correct pause-nodes", "skipped --nemesis pause-nodes needs at least three nodes, so that a bare majority remains when a minority stops; backend redis under --runtime process has none (backends that have it: etcd, redlock, redsync, sentinel, zookeeper)"},
		{"correct pause-leader", "skipped --nemesis pause-leader needs a service that names its leader; backend redis under --runtime process has none (backends that have it: etcd, sentinel, zookeeper)"},
	} {
		assert.Equal(t, tc.want, got[tc.cell], tc.cell)
	}
	var line []string
	for _, c := range cells {
		if c.Variant == "setnx-expire" && results.FaultsName(c.Nemesis) == "kill-client" {
			line = c.cfg.Run.CommandLine
		}
	}
	assert.Equal(t, []string{"lockcheck", "run", "--backend", "redis", "--variant", "setnx-expire", "--workload", "unfenced",
		"--nemesis", "kill-client", "--time-limit", "15s", "--seed", "1"}, line, "each cell records the run command that repeats it")
}

func TestCompareBadInputIsOneLineAndExitTwo(t *testing.T) {
	store := t.TempDir()
	assertRefused(t, store, []string{"compare", "--out", store}, []badInput{
		{"unknown backend", []string{"--backends", "consul"}, `--backends: unknown backend "consul"`},
		{"unknown variant", []string{"--backends", "redis/nope"}, `no variant "nope"`},
		{"unknown workload", []string{"--workloads", "fenced,maybe"}, `unknown workload "maybe"`},
		{"unknown fault", []string{"--nemesis", "none,meteor"}, `--nemesis: unknown nemesis "meteor"`},
		{"bad time limit", []string{"--time-limit", "-1s"}, "--time-limit=-1s: must be a positive duration"},
	})
}

// TestCompareRunsTheMatrix runs two short cells on a real Redis.
func TestCompareRunsTheMatrix(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	store := t.TempDir()
	inv := lockcheck("compare", "--out", store, "--seed", "1", "--backends", "redis", "--workloads", "unfenced",
		"--nemesis", "none,pause-holder,kill-client", "--time-limit", "4s")
	assert.Equal(t, exitInvalid, inv.code, "the paused holder loses updates: stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
	lines := strings.Split(strings.TrimSpace(inv.stdout), "\n")
	require.NotEmpty(t, lines)
	assert.Regexp(t, `^comparison: .*-compare/compare.html$`, lines[len(lines)-1])

	entries, err := os.ReadDir(store)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	dir := filepath.Join(store, entries[0].Name())
	cmp, err := results.ReadComparison(dir)
	require.NoError(t, err)
	require.Len(t, cmp.Cells, 3)
	none, paused, killed := cmp.Cells[0], cmp.Cells[1], cmp.Cells[2]
	assert.Equal(t, results.CellRan, none.Status)
	assert.Equal(t, checker.Valid, *none.Valid, none.Reason)
	assert.Equal(t, results.CellRan, paused.Status)
	assert.Equal(t, checker.Invalid, *paused.Valid)
	assert.Positive(t, paused.Counts.LostUpdates)
	assert.Equal(t, results.CellRan, killed.Status, "kill-client kills the holder before its write where acquire has no failpoint")
	assert.NotEmpty(t, cmp.Finished)
	for _, c := range cmp.Cells {
		_, err := os.Stat(filepath.Join(dir, c.Dir, results.ReportFile))
		assert.NoError(t, err, "the cell links a report that exists")
	}

	raw, err := os.ReadFile(filepath.Join(dir, results.JUnitFile))
	require.NoError(t, err)
	var doc struct {
		Suites []struct {
			Name string `xml:"name,attr"`
		} `xml:"testsuite"`
		Failures int `xml:"failures,attr"`
		Skipped  int `xml:"skipped,attr"`
	}
	require.NoError(t, xml.Unmarshal(raw, &doc))
	assert.Len(t, doc.Suites, 3, "a suite per cell")
	assert.Positive(t, doc.Failures)
	assert.Zero(t, doc.Skipped)
	page, err := os.ReadFile(filepath.Join(dir, results.CompareReport))
	require.NoError(t, err)
	assert.Contains(t, string(page), `<a href="`+paused.Dir+`/report.html"><span class="badge fail">false</span></a>`)
}
