package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/workloads"
)

// nodeSpecs are the nodes a run starts: the backend's topology, or none
// for a service that is already running (--addr).
func nodeSpecs(cfg Config, b catalog.Backend) []backends.NodeSpec {
	if len(cfg.Addrs) > 0 {
		return nil
	}
	return b.Nodes(cfg.Programs, cfg.Run.Params)
}

// lockKeys are the keys the clients contend for, under the run's prefix.
func lockKeys(cfg Config) []string {
	keys := workloads.KeyNames(cfg.Run.Keys)
	for i := range keys {
		keys[i] = cfg.KeyPrefix + keys[i]
	}
	return keys
}

// cleanTimeout is the least time clean gives a backend's cleaner.
const cleanTimeout = 5 * time.Second

// clean deletes what the run left on a service it did not start, where the
// backend's client can (a backends.Cleaner); otherwise it says what may be
// left.
func (r *run) clean() {
	lock, err := catalog.Open(r.spec, nil)
	if err != nil {
		r.log.Warn("cleaning the run's keys", "err", err)
		return
	}
	defer lock.Close()
	keys := lockKeys(r.cfg)
	c, ok := lock.(backends.Cleaner)
	if !ok {
		r.log.Warn("the backend cannot delete its keys: they expire with their TTL", "keys", strings.Join(keys, ","))
		return
	}
	// A cleaner may read the service again until what it ended is gone
	// (PostgreSQL's terminated sessions): more than one operation's time.
	ctx, cancel := context.WithTimeout(context.Background(), max(r.cfg.OpTimeout, cleanTimeout))
	defer cancel()
	if err := c.Clean(ctx, keys); err != nil {
		r.log.Warn("the run's keys may still be held on the service", "err", err)
	}
}

// Run params a run against a service that is already running records.
const (
	ParamAddr      = "addr"
	ParamKeyPrefix = "key_prefix"
)

// NewKeyPrefix is the prefix of a run's lock keys on a service that is
// already running, new for each run so that two runs (or a run and its
// reproduction) never share a key: lockcheck:<time>-<random>:.
func NewKeyPrefix() string {
	id := make([]byte, 3)
	rand.Read(id)
	return "lockcheck:" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(id) + ":"
}
