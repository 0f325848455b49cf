// Command lockcheck tests distributed locks against real servers under real
// faults and checks the history it records.
package main

import (
	_ "github.com/lockcheck/lockcheck/backends/catalog/withetcd"    // the etcd backend
	_ "github.com/lockcheck/lockcheck/harness/container/withdocker" // --runtime docker
	"github.com/lockcheck/lockcheck/internal/cli"
)

func main() { cli.Main() }
