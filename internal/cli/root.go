package cli

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/lockcheck/lockcheck/internal/buildinfo"
)

func newRootCmd() *cobra.Command {
	var logLevel string
	root := &cobra.Command{
		Use:   "lockcheck",
		Short: "Test distributed locks on real servers under real faults",
		Long: `lockcheck starts real lock servers, runs concurrent clients that take the lock
and write to a protected resource, injects faults (pauses, kills), records a
history, checks it for lease safety, double ownership, lost updates, stale
writes, fencing order, liveness and linearizability, and writes a report.

Exit codes: 0 the verdict is true, 1 it is false, 2 it is unknown or
lockcheck could not run.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: choose debug, info, warn or error", logLevel)
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
			return validateFlags(cmd.Flags())
		},
	}
	root.PersistentFlags().StringVar(&logLevel, "log-level", "warn", "log level on stderr: debug, info, warn or error")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%v (see %s --help)", err, cmd.CommandPath())
	})
	root.AddCommand(newRunCmd(), newSoakCmd(), newCheckCmd(), newCompareCmd(), newSweepCmd(), newMergeCmd(), newServeCmd(), newScenarioCmd(), newShrinkCmd(), newImagesCmd(), newWorkerCmd(), newClientCmd(), newVersionCmd())
	root.CompletionOptions.DisableDefaultCmd = true
	root.Version = buildinfo.Current().String()
	root.SetVersionTemplate("{{.Version}}")
	return root
}

// newWorkerCmd is the client process the harness starts; its configuration
// comes through the environment, so running it by hand only explains that.
func newWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "worker",
		Short:  "internal: one client process of a run",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("the worker is started by lockcheck run, not by hand")
		},
	}
}
