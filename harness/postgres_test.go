package harness

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/postgres"
	"github.com/lockcheck/lockcheck/backends/postgres/pgtest"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/harness/netproxy"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
)

// processesUnder lists the live processes whose command line names dir:
// the nodes, their servers (a postmaster keeps its -D argument) and
// pg_basebackup.
func processesUnder(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), dir) {
			continue
		}
		if pid, _ := strconv.Atoi(e.Name()); processState(pid) != "Z" {
			out = append(out, e.Name()+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return out
}

// failover-promote kills the primary under a holder parked before its
// write and promotes the standby: the advisory lock is gone, another
// client takes it on the promoted node, and the holder writes on. The
// fault lands; PostgreSQL kept its promise (no lease violation: the kill
// ended the session's lease), and what the holder did with its belief is
// double ownership, and lost updates unless the resource fences it off.
// The resource lives on an instance of its own, which no failover touches.
func TestFailoverPromoteFreesEveryAdvisoryLock(t *testing.T) {
	testtier.Long(t)
	pgtest.Require(t)
	tests := []struct {
		workload string
		valid    checker.Validity
		lost     bool // lost updates, else stale writes refused by the database
	}{
		{"unfenced", checker.Invalid, true},
		{"fenced", checker.Valid, false},
	}
	for _, tt := range tests {
		t.Run(tt.workload, func(t *testing.T) {
			cfg := testConfig(t, postgres.Session, tt.workload, []string{"failover-promote"}, 12*time.Second)
			cfg.Run.Backend, cfg.Run.Resource = "postgres", "postgres"
			cfg.Run.Params = map[string]string{catalog.ParamPostgresReplicas: "1"}
			cfg.Pause, cfg.Interval = time.Second, 2*time.Second
			out, err := Run(context.Background(), cfg)
			require.NoError(t, err)
			assert.Empty(t, childrenOf(os.Getpid()), "no node or worker may outlive the run")
			assert.Eventually(t, func() bool { return len(processesUnder(out.Dir)) == 0 }, 10*time.Second, 100*time.Millisecond,
				"a postgres process outlived the run: %v", processesUnder(out.Dir))
			assert.DirExists(t, filepath.Join(out.Dir, "nodes", postgres.ResourceNode), "the resource is kept apart from the failed-over cluster")

			h, res, err := results.CheckDir(out.Dir, checker.Options{})
			require.NoError(t, err)
			var kills, promotions int
			for _, e := range h.Events {
				if e.Process != history.Nemesis || e.Value == nil {
					continue
				}
				switch e.F {
				case history.NemKill:
					kills++
				case history.NemSwitchMaster:
					promotions++
				}
			}
			assert.Positive(t, kills, "a primary was killed")
			assert.Positive(t, promotions, "a standby was promoted")
			require.Positive(t, res.FaultLanding.Landed, "no failover landed: %s", res.FaultLanding.Missed)
			c := res.Checks
			assert.Equal(t, tt.valid, res.Valid, res.Reason)
			assert.Zero(t, c.LeaseSafety.Violations, "the kill of the primary ended the lease; a grant by the promoted standby is no violation")
			assert.Positive(t, c.DoubleOwnership.Windows, "the holder believed on after the promoted standby granted the lock")
			if tt.lost {
				assert.Positive(t, c.Resource.LostUpdates)
			} else {
				assert.Zero(t, c.Resource.LostUpdates)
				assert.Positive(t, c.Resource.StaleWritesRefused, "the database refused the old holder's write")
			}
		})
	}
}

// Ctrl-C while a standby copies its primary, at start-up (pg-1) or when the
// old primary rejoins during failover-promote (pg-0), leaves no process
// behind: not the nodes, their servers, nor pg_basebackup.
func TestInterruptedFailoverLeavesNoPostgres(t *testing.T) {
	testtier.Long(t)
	pgtest.Require(t)
	tests := []struct {
		name string
		// copying is the node whose pg_basebackup the run is cancelled in.
		copying string
	}{
		{"while pg-1 copies pg-0 at start-up", postgres.Standby},
		{"while the old primary rejoins", postgres.Primary},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, postgres.Session, "unfenced", []string{"failover-promote"}, time.Minute)
			cfg.Run.Backend = "postgres"
			cfg.Run.Params = map[string]string{catalog.ParamPostgresReplicas: "1"}
			cfg.Pause, cfg.Interval = 500*time.Millisecond, time.Second
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			copying := string(filepath.Separator) + filepath.Join("nodes", tt.copying, "data")
			cancelled := make(chan bool, 1)
			go func() {
				defer cancel()
				deadline := time.Now().Add(time.Minute)
				for time.Now().Before(deadline) {
					for _, p := range processesUnder(cfg.Out) {
						if strings.Contains(p, "pg_basebackup") && strings.Contains(p, copying) {
							cancelled <- true
							return
						}
					}
					time.Sleep(5 * time.Millisecond)
				}
				cancelled <- false
			}()
			_, err := Run(ctx, cfg)
			require.True(t, <-cancelled, "%s ran no pg_basebackup within a minute", tt.copying)
			if err != nil {
				var si *StartInterrupted
				require.ErrorAs(t, err, &si)
			}
			assert.Empty(t, childrenOf(os.Getpid()), "no node or worker may outlive the run")
			assert.Eventually(t, func() bool { return len(processesUnder(cfg.Out)) == 0 }, 10*time.Second, 100*time.Millisecond,
				"a postgres process outlived the run: %v", processesUnder(cfg.Out))
		})
	}
}

// Through the process runtime's proxies a standby's replication connection
// is its own link: cut from the primary, the standby receives nothing the
// primary writes, and once the cut heals it reconnects and catches up.
// The walreceiver connects from 127.0.0.1, like lockcheck's own checks; its
// application_name names it.
func TestStandbyReplicationIsALinkOfItsOwn(t *testing.T) {
	testtier.Long(t)
	pgtest.Require(t)
	b := mustBackend(t, Config{Run: history.RunConfig{Backend: "postgres"}})
	p := newProcs()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	nodes, network, err := startNodes(ctx, p, b.Nodes(nil, map[string]string{catalog.ParamPostgresReplicas: "1"}), dir, true)
	require.NoError(t, err)
	t.Cleanup(func() {
		p.killAll(5 * time.Second)
		network.Close()
	})
	eps := []backends.Endpoint{nodes[0].ep, nodes[1].ep}
	require.NoError(t, b.Ready(ctx, eps))

	primary, err := postgres.Connect(ctx, eps[0].Addr(), 5*time.Second)
	require.NoError(t, err)
	defer primary.Close(context.Background())
	standby, err := postgres.Connect(ctx, eps[1].Addr(), 5*time.Second)
	require.NoError(t, err)
	defer standby.Close(context.Background())
	// testify polls in a goroutine of its own, and one poll can still be
	// running when Never gives way to Eventually: a pgx connection used by
	// two at once is broken for good ("conn busy"), so the polls take
	// turns.
	var polling sync.Mutex
	replicated := func() bool {
		polling.Lock()
		defer polling.Unlock()
		var there bool
		err := standby.QueryRow(ctx, `SELECT to_regclass('cut_probe') IS NOT NULL`).Scan(&there)
		return err == nil && there
	}

	network.Set(postgres.Standby, postgres.Primary, netproxy.Rule{Cut: true})
	_, err = primary.Exec(ctx, `CREATE TABLE cut_probe (v int)`)
	require.NoError(t, err)
	assert.Never(t, replicated, 2*time.Second, 100*time.Millisecond, "the standby received a write across the cut")
	network.Set(postgres.Standby, postgres.Primary, netproxy.Rule{})
	if !assert.Eventually(t, replicated, time.Minute, 100*time.Millisecond, "the standby caught up once the cut healed") {
		// Keep what the nodes said about their replication.
		polling.Lock()
		defer polling.Unlock()
		var receiver string
		err := standby.QueryRow(ctx, `SELECT coalesce(string_agg(status || ' ' || coalesce(sender_host, '') || ':' || coalesce(sender_port::text, ''), '; '), 'no walreceiver') FROM pg_stat_wal_receiver`).Scan(&receiver)
		t.Logf("standby's walreceiver: %s (%v)", receiver, err)
		logs, _ := filepath.Glob(filepath.Join(dir, "*", "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("%s, last lines:\n%s", l, strings.Join(lines[max(0, len(lines)-30):], "\n"))
		}
	}
}
