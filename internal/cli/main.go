// Package cli is the lockcheck command line: run, check, compare, scenario,
// serve, images and the hidden worker. cmd/lockcheck and the public package
// lockcheck (a user's own main, with the user's backends registered) both
// run it through Main.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/lockcheck/lockcheck/backends/catalog"
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

// Main runs this process as lockcheck with the command line os.Args and
// exits with its exit code. Workers and some backends' nodes are this
// executable started again; they are told apart by their environment so
// that they never parse the user's flags.
func Main() {
	if harness.RunWorkerFromEnv() || catalog.RunNodeFromEnv() {
		return
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns its exit code. Every error is
// one line on stderr.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	var ee exitError
	switch {
	case err == nil:
		return exitValid
	case errors.As(err, &ee):
		return ee.code
	}
	fmt.Fprintf(stderr, "lockcheck: %v\n", err)
	return exitUnknown
}
