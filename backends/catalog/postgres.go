package catalog

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/postgres"
)

// ParamPostgresReplicas is the run param that gives the primary a
// streaming standby (--replicas).
const ParamPostgresReplicas = "replicas"

// postgresFailover is the fault that needs the standby, which it promotes.
const postgresFailover = "failover-promote"

// The run params of a pooler in front of the primary (--pooler pgbouncer)
// and of how the clients send their statements.
const (
	ParamPooler            = postgres.ParamPooler
	ParamPoolMode          = "pool-mode"
	ParamPoolSize          = "pool-size"
	ParamPoolerIdleTimeout = "pooler-idle-timeout"
	ParamQueryExecMode     = "query-exec-mode"
)

func init() {
	Register(Backend{
		Name:     "postgres",
		Variants: postgres.Variants,
		Nodes: func(p Programs, params map[string]string) []backends.NodeSpec {
			nodes := []backends.NodeSpec{PostgresNode(p, postgres.Primary)}
			if params[ParamPostgresReplicas] == "1" {
				nodes = append(nodes, PostgresNode(p, postgres.Standby))
			}
			if params[ParamPooler] == postgres.Pooler.Name {
				nodes = append(nodes, poolerNode(p, params))
			}
			return nodes
		},
		// Behind a pooler the clients reach the primary through it alone.
		ClientAddrs: func(all []backends.Endpoint) []string {
			for _, e := range all {
				if e.Name == postgres.PoolerName {
					return []string{e.Addr()}
				}
			}
			return backends.Addrs(all)
		},
		Ready: func(ctx context.Context, all []backends.Endpoint) error {
			if err := postgres.Prepare(ctx, all[0].Addr()); err != nil {
				return err
			}
			if postgres.Replicated(all) {
				return postgres.NewReplicatedService(all).WaitStreaming(ctx, postgres.Primary, postgres.Standby)
			}
			return nil
		},
		PrepareAddrs: func(ctx context.Context, addrs []string) error { return postgres.Prepare(ctx, addrs[0]) },
		Service: func(all []backends.Endpoint) any {
			// Only a cluster with a standby offers the promotion
			// failover-promote needs.
			if postgres.Replicated(all) {
				return postgres.NewReplicatedService(all)
			}
			return postgres.NewService(all)
		},
		Open: func(s Spec, fp backends.Failpoint) (backends.Lock, error) {
			mode := s.Extra[ParamQueryExecMode]
			if mode == "" {
				mode = postgres.DefaultExecMode
			}
			opts := postgres.Options{Client: s.Client(fp), Addrs: s.Addrs, Variant: s.Variant, ExecMode: postgres.ExecModes[mode]}
			if s.Extra[ParamPooler] != "" {
				opts.Via = postgres.PoolerName
			}
			return postgres.New(opts)
		},
		Programs:         []backends.Program{postgres.Server, postgres.Pooler},
		Flags:            &Flags{Bind: postgresFlags},
		Signature:        []string{"kill-session"},
		RequiresResource: map[string]string{postgres.Xact: "postgres"},
		RunNode:          postgres.RunNodeFromEnv,

		Fences: EveryVariant, // nextval of a sequence, in the lock's session
		// An advisory lock lasts as long as its session, until released.
		LeasesUntilRelease: true,
	})
}

// postgresFlags give the primary a streaming standby, which failover-promote
// needs and so always gets, or a pooler in front of it, and say how the
// clients send their statements.
func postgresFlags(fl *pflag.FlagSet) func(*Settings) error {
	replicas := fl.Int(ParamPostgresReplicas, 0, "postgres: streaming standbys of the primary, 0 or 1 (pg-1, a pg_basebackup of pg-0 in hot standby); --nemesis failover-promote starts one whatever this says")
	pooler := fl.String(ParamPooler, "", "postgres: a connection pooler in front of the primary, which the clients reach it through: pgbouncer (Debian's PgBouncer on loopback as node "+postgres.PoolerName+", its pgbouncer.ini, userlist.txt and log in the node's directory; local processes only); empty: none")
	mode := fl.String(ParamPoolMode, postgres.PoolSession, "postgres --pooler: PgBouncer's pool_mode: session (a client keeps its server connection while it is connected, PgBouncer's default) or transaction (only for a transaction or a statement outside one, as most deployments run it: a session lock then lands on whichever server connection the statement gets)")
	size := fl.Int(ParamPoolSize, postgres.DefaultPoolSize, "postgres --pooler: server connections in the pool (default_pool_size), fewer than --clients so that they share them; in session pooling a connected client keeps its own, and the others' connects wait in PgBouncer's queue until --op-timeout ends them")
	idle := fl.Duration(ParamPoolerIdleTimeout, 0, "postgres --pooler: PgBouncer's server_idle_timeout and client_idle_timeout (0: its defaults, 600s and none); a server connection idle that long is closed, freeing the locks left on it; PgBouncer closes no client that holds a server connection")
	execMode := fl.String(ParamQueryExecMode, postgres.DefaultExecMode, "postgres: how the clients send statements, pgx's default_query_exec_mode: cache_statement (pgx's default, the extended protocol with statements prepared once per connection), cache_describe, describe_exec, exec, or simple_protocol")
	return func(s *Settings) error {
		n := *replicas
		if n != 0 && n != 1 {
			return fmt.Errorf("--%s %d: choose 0 or 1", ParamPostgresReplicas, n)
		}
		if slices.Contains(s.Faults, postgresFailover) {
			n = 1
		}
		if n > 0 {
			s.Params[ParamPostgresReplicas] = strconv.Itoa(n)
		}
		switch _, ok := postgres.ExecModes[*execMode]; {
		case s.Program && s.Changed(ParamQueryExecMode):
			return fmt.Errorf("--%s is how lockcheck's own PostgreSQL client (pgx) sends its statements; a --client program sends its own with its library: drop it, and set the library's own option in the program", ParamQueryExecMode)
		case !ok:
			return fmt.Errorf("--%s %q: choose cache_statement, cache_describe, describe_exec, exec or simple_protocol", ParamQueryExecMode, *execMode)
		case !s.Program:
			s.Params[ParamQueryExecMode] = *execMode
		}
		return poolerSettings(s, *pooler, *mode, *size, *idle, n)
	}
}

// poolerSettings checks the pooler's flags and records them as params.
func poolerSettings(s *Settings, pooler, mode string, size int, idle time.Duration, replicas int) error {
	if pooler == "" {
		for _, name := range []string{ParamPoolMode, ParamPoolSize, ParamPoolerIdleTimeout} {
			if s.Changed(name) {
				return fmt.Errorf("--%s applies to --%s %s only", name, ParamPooler, postgres.Pooler.Name)
			}
		}
		return nil
	}
	switch {
	case pooler != postgres.Pooler.Name:
		return fmt.Errorf("--%s %q: choose %s (or leave it empty for none)", ParamPooler, pooler, postgres.Pooler.Name)
	case mode != postgres.PoolSession && mode != postgres.PoolTransaction:
		return fmt.Errorf("--%s %q: choose %s or %s", ParamPoolMode, mode, postgres.PoolSession, postgres.PoolTransaction)
	case size < 1:
		return fmt.Errorf("--%s %d: at least 1", ParamPoolSize, size)
	case idle < 0:
		return fmt.Errorf("--%s %s: cannot be negative", ParamPoolerIdleTimeout, idle)
	case replicas > 0:
		return fmt.Errorf("--%s %s fronts the primary alone: not with a standby (--%s, %s)", ParamPooler, pooler, ParamPostgresReplicas, postgresFailover)
	}
	s.Params[ParamPooler] = pooler
	s.Params[ParamPoolMode] = mode
	s.Params[ParamPoolSize] = strconv.Itoa(size)
	if idle > 0 {
		s.Params[ParamPoolerIdleTimeout] = idle.String()
	}
	return nil
}

// poolerNode is the PgBouncer node params describe, found as programs say;
// the run flags validated them.
func poolerNode(p Programs, params map[string]string) backends.NodeSpec {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	pgbouncer, err := postgres.Pooler.Find(p.Path(postgres.Pooler.Name))
	if err != nil {
		pgbouncer = p.Path(postgres.Pooler.Name) // preflight reports it
	}
	pool := postgres.Pool{Mode: cmp.Or(params[ParamPoolMode], postgres.PoolSession), Size: postgres.DefaultPoolSize}
	if n, err := strconv.Atoi(params[ParamPoolSize]); err == nil {
		pool.Size = n
	}
	pool.IdleTimeout, _ = time.ParseDuration(params[ParamPoolerIdleTimeout])
	return postgres.PoolerNode(self, pgbouncer, pool)
}

// PostgresNode is a PostgreSQL node named name, for the postgres backend
// and for --resource postgres: lockcheck itself (in tests, the test binary)
// runs initdb, or pg_basebackup for a standby, and the server found as
// programs say.
func PostgresNode(p Programs, name string) backends.NodeSpec {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	server, err := postgres.Server.Find(p.Path(postgres.Server.Name))
	if err != nil {
		server = p.Path(postgres.Server.Name) // preflight reports it
	}
	return postgres.Node(name, self, server)
}
