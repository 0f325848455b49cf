package catalog

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/postgres"
)

// ParamPostgresReplicas is the run param that gives the primary a
// streaming standby (--replicas).
const ParamPostgresReplicas = "replicas"

// postgresFailover is the fault that needs the standby, which it promotes.
const postgresFailover = "failover-promote"

func init() {
	Register(Backend{
		Name:     "postgres",
		Variants: postgres.Variants,
		Nodes: func(p Programs, params map[string]string) []backends.NodeSpec {
			nodes := []backends.NodeSpec{PostgresNode(p, postgres.Primary)}
			if params[ParamPostgresReplicas] == "1" {
				nodes = append(nodes, PostgresNode(p, postgres.Standby))
			}
			return nodes
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
			return postgres.New(postgres.Options{Client: s.Client(fp), Addrs: s.Addrs, Variant: s.Variant})
		},
		Programs:         []backends.Program{postgres.Server},
		Flags:            &Flags{Bind: postgresFlags},
		Signature:        []string{"kill-session"},
		RequiresResource: map[string]string{postgres.Xact: "postgres"},
		RunNode:          postgres.RunNodeFromEnv,
	})
}

// postgresFlags give the primary a streaming standby, which failover-promote
// needs and so always gets.
func postgresFlags(fl *pflag.FlagSet) func(*Settings) error {
	replicas := fl.Int(ParamPostgresReplicas, 0, "postgres: streaming standbys of the primary, 0 or 1 (pg-1, a pg_basebackup of pg-0 in hot standby); --nemesis failover-promote starts one whatever this says")
	return func(s *Settings) error {
		if s.Backend != "postgres" {
			if s.Changed(ParamPostgresReplicas) {
				return fmt.Errorf("--%s applies to --backend postgres only", ParamPostgresReplicas)
			}
			return nil
		}
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
		return nil
	}
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
