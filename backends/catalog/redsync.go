package catalog

import (
	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/redlock"
	"github.com/lockcheck/lockcheck/backends/redsync"
)

func init() {
	Register(fiveMasters("redsync", "default", func(o redlock.Options) (backends.Lock, error) { return redsync.New(o) }))
}
