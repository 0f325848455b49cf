package harness

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/postgres"
	"github.com/lockcheck/lockcheck/workloads/pgresource"
	"github.com/lockcheck/lockcheck/workloads/resource"
)

// resourceOf is the run's resource, memory by default.
func resourceOf(cfg Config) string {
	if cfg.Run.Resource == "" {
		return resource.Memory
	}
	return cfg.Run.Resource
}

// preflightResource checks --resource, the variant's needs and the
// database's programs.
func preflightResource(cfg Config, b catalog.Backend) error {
	res := resourceOf(cfg)
	switch res {
	case resource.Memory:
	case pgresource.Name:
		if _, err := postgres.Server.Find(cfg.Programs.Path(postgres.Server.Name)); err != nil {
			return fmt.Errorf("--resource postgres: %w", err)
		}
	default:
		return fmt.Errorf("--resource %q: choose %s or %s", res, resource.Memory, pgresource.Name)
	}
	if need, ok := b.RequiresResource[cfg.Run.Variant]; ok && need != res {
		return fmt.Errorf("--variant %s of backend %s writes the resource inside the lock's transaction: add --resource %s", cfg.Run.Variant, b.Name, need)
	}
	if _, ok := b.RequiresResource[cfg.Run.Variant]; ok && cfg.Run.Params[catalog.ParamPostgresReplicas] != "" {
		return fmt.Errorf("--variant %s writes the resource inside the lock's transaction, but with a standby (--%s, failover-promote) the resource lives on an instance of its own that no failover touches: use --variant %s", cfg.Run.Variant, catalog.ParamPostgresReplicas, postgres.Session)
	}
	return nil
}

// database is the PostgreSQL node that keeps --resource postgres.
type database struct {
	addr string
	// stop stops the node if the run started it for the resource alone.
	stop func()
}

// startDatabase finds the PostgreSQL node of the topology (the postgres
// backend's own, so that its xact variant writes the resource in the
// lock's transaction) or starts one as a local process, and creates the
// resource's tables and rows. A topology with a standby keeps the resource
// on an instance of its own (pg-resource), which no failover touches.
func startDatabase(ctx context.Context, cfg Config, p *procs, eps []backends.Endpoint, dir string, keys []string) (*database, error) {
	db := &database{stop: func() {}}
	name := postgres.Primary
	for _, e := range eps {
		if e.Name == postgres.Primary && !postgres.Replicated(eps) {
			db.addr = e.Addr()
		}
		if e.Name == postgres.Primary {
			name = postgres.ResourceNode
		}
	}
	if db.addr == "" {
		nodes, err := startTopology(ctx, p, []backends.NodeSpec{catalog.PostgresNode(cfg.Programs, name)}, dir)
		if err != nil {
			return nil, fmt.Errorf("--resource postgres: %w", err)
		}
		db.addr, db.stop = nodes[0].addr(), nodes[0].Stop
	}
	if err := pgresource.Setup(ctx, db.addr, keys); err != nil {
		db.stop()
		return nil, err
	}
	return db, nil
}

// export writes the audit table into the run's resource log at path,
// created by create.
func (db *database) export(ctx context.Context, create func(string) (io.WriteCloser, error), path string) error {
	log, err := create(path)
	if err != nil {
		return err
	}
	return errors.Join(pgresource.Export(ctx, db.addr, log), log.Close())
}
