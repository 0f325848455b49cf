package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/postgres"
	"github.com/lockcheck/lockcheck/history"
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
	// exported is the last audit row written out, into exportedTo, and
	// heads each key's state after it: a segmented run exports the table
	// segment by segment.
	exported   int64
	exportedTo string
	heads      map[string]*history.KeyHead
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

// export writes the audit table's rows since the last export into the
// resource log at path, created by create, and returns each key's value
// and highest written fence after them, in key order (what a segmented
// run's next segment starts from).
//
// A failed export leaves no file behind and exports the same rows the
// next time; an export into the file of the last one (a segment boundary
// whose next segment could not start, then the run's end) appends to it.
func (db *database) export(ctx context.Context, create func(string) (io.WriteCloser, error), path string) ([]history.KeyHead, error) {
	again := path == db.exportedTo
	if again {
		create = func(path string) (io.WriteCloser, error) { return os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0) }
	}
	log, err := create(path)
	if err != nil {
		return nil, err
	}
	if db.heads == nil {
		db.heads = map[string]*history.KeyHead{}
	}
	last, err := pgresource.Export(ctx, db.addr, log, db.exported, func(e *history.ResourceEntry) {
		if !e.Accepted {
			return
		}
		h := db.heads[e.Key]
		if h == nil {
			h = &history.KeyHead{Key: e.Key}
			db.heads[e.Key] = h
		}
		h.Value = history.Int64(e.Value)
		if e.Fence != nil && (h.WrittenFence == nil || *e.Fence > *h.WrittenFence) {
			h.WrittenFence = history.Int64(*e.Fence)
		}
	})
	if err := errors.Join(err, log.Close()); err != nil {
		if !again {
			os.Remove(path)
		}
		return nil, err
	}
	db.exported, db.exportedTo = last, path
	heads := make([]history.KeyHead, 0, len(db.heads))
	for _, key := range slices.Sorted(maps.Keys(db.heads)) {
		heads = append(heads, *db.heads[key])
	}
	return heads, nil
}
