package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/program"
)

// clientFlags say which lock client program a run tests (docs/clients.md).
type clientFlags struct {
	command, name, topology string
	initTimeout             time.Duration
}

func addClientFlags(fl *pflag.FlagSet, c *clientFlags) {
	fl.StringVar(&c.command, "client", "", `a lock client program to test instead of --backend, speaking lockcheck's client protocol (docs/clients.md), such as 'python3 my_lock.py': split into arguments at spaces, with '...' and "..." quoting and \ escaping as in a shell, and run with no shell; lockcheck starts one per client slot, as a child of its worker`)
	fl.StringVar(&c.name, "client-name", "", "the name the --client program is tested under, in the run directory, the report and results.json (default: its script's or program's base name)")
	fl.StringVar(&c.topology, "topology", "", "with --client: the built-in backend whose servers lockcheck starts for the program, or whose service --addr names ("+strings.Join(catalog.Names(), ", ")+"; default redis)")
	fl.DurationVar(&c.initTimeout, "client-init-timeout", program.DefaultInitTimeout, "with --client: how long the program may take to answer init (all --clients start at once: a JVM loading its library on a busy machine can take seconds); the time limit starts once every client answered")
}

// target is the lock the --client program is, on its topology, and its
// name; ok is false without --client.
func (c clientFlags) target(changed func(string) bool) (b catalog.Backend, ok bool, err error) {
	if c.command == "" {
		if changed("topology") || changed("client-name") {
			return b, false, errors.New("--topology and --client-name go with --client: give the program to test with --client 'CMD ARGS'")
		}
		return b, false, nil
	}
	if changed("backend") || changed("variant") {
		return b, false, errors.New("--client and --backend/--variant: a client program is tested instead of a backend; name the servers it needs with --topology")
	}
	b, err = clientTarget(c.command, c.name, c.topology, c.initTimeout)
	return b, err == nil, err
}

// clientTarget is the program command (a --client value) as the lock a
// run tests, named name (default from the command), on topology.
func clientTarget(command, name, topology string, initTimeout time.Duration) (catalog.Backend, error) {
	argv, err := program.SplitCommand(command)
	if err != nil {
		return catalog.Backend{}, fmt.Errorf("--client %q: %w", command, err)
	}
	return catalog.ClientTarget(name, catalog.ClientProgram{Command: argv, Topology: topology, InitTimeout: initTimeout})
}
