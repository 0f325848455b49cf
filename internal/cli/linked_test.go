package cli

// The etcd backend and the docker runtime register from packages of their
// own, which cmd/lockcheck imports: the tests of its command line link them
// too.
import (
	_ "github.com/lockcheck/lockcheck/backends/catalog/withetcd"
	_ "github.com/lockcheck/lockcheck/harness/container/withdocker"
)
