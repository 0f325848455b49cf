// Command lockcheck tests distributed locks against real servers under real
// faults and checks the history it records.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/lockcheck/lockcheck/harness"
)

// Exit codes scripts can rely on.
const (
	exitValid   = 0 // the verdict is true
	exitInvalid = 1 // the verdict is false
	exitUnknown = 2 // the verdict is unknown, or lockcheck could not run
)

// exitError carries an exit code out of a command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	// Workers are lockcheck itself; they are told apart by their environment
	// so that a worker never parses the user's flags.
	if harness.RunWorkerFromEnv() {
		return
	}
	root := newRootCmd()
	err := root.Execute()
	var ee exitError
	switch {
	case err == nil:
		os.Exit(exitValid)
	case errors.As(err, &ee):
		os.Exit(ee.code)
	default:
		fmt.Fprintf(os.Stderr, "lockcheck: %v\n", err)
		os.Exit(exitUnknown)
	}
}
