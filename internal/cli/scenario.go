package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/program"
	"github.com/lockcheck/lockcheck/results"
	"github.com/lockcheck/lockcheck/scenario"
	"github.com/lockcheck/lockcheck/scenario/repro"
)

func newScenarioCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scenario",
		Short: "Reproduce incidents: exact timelines with expected outcomes",
		Long: `A scenario fixes the backend, variant, workload, TTL and clients, gives an
exact timeline of faults (at times, or when a client reaches a moment) and
states which checks must fail and which must hold. lockcheck ships a
catalogue, one scenario per failure its seed articles describe; a YAML file
of your own reproduces your incident (see docs/scenarios.md).`,
	}
	cmd.AddCommand(newScenarioListCmd(), newScenarioRunCmd(), newShrinkCmd())
	return cmd
}

func newScenarioListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the shipped scenarios",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			all, err := scenario.Catalogue()
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tBACKEND\tTITLE")
			for _, f := range all {
				fmt.Fprintf(w, "%s\t%s/%s\t%s\n", f.Name, f.Backend, f.Variant, f.Title)
			}
			return w.Flush()
		},
	}
}

func newScenarioRunCmd() *cobra.Command {
	var (
		all  bool
		file string
		out  string
		// initTimeout is --client-init-timeout.
		initTimeout time.Duration
		programs    = catalog.Programs{}
		// runtimeParams gives --runtime and the images as run params.
		runtimeParams func() (map[string]string, error)
		// files and runParams are what PreRunE read.
		files     []*scenario.File
		runParams map[string]string
	)
	cmd := &cobra.Command{
		Use:   "run [NAME ...]",
		Short: "Run scenarios and compare what they show with what they expect",
		Long: `run runs the named shipped scenarios, all of them (--all), or one from a
YAML file (--file), prints expected against observed for each, and exits 0
only when every expectation of every scenario is met (1 otherwise, 2 on an
error). Each run writes a run directory like lockcheck run does; its report
explains the scenario in the terms of the account it reproduces. A run that
ends false also gets repro.yaml: the scenario as run, expecting the checks
that failed, which lockcheck shrink RUN_DIR starts from.`,
		// Every scenario is read and preflighted before the first runs.
		PreRunE: func(cmd *cobra.Command, names []string) (err error) {
			if files, err = pickScenarios(names, all, file); err != nil {
				return err
			}
			if cmd.Flags().Changed("client-init-timeout") {
				if err := setClientInitTimeout(files, initTimeout); err != nil {
					return err
				}
			}
			if runParams, err = runtimeParams(); err != nil {
				return err
			}
			for _, f := range files {
				if _, err := f.Plan(out, programs, runParams); err != nil {
					return fmt.Errorf("scenario %s: %w", f.Name, err)
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			failed := 0
			for _, f := range files {
				ok, err := runScenario(ctx, cmd.OutOrStdout(), f, out, programs, runParams)
				if err != nil {
					return err
				}
				if !ok {
					failed++
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\n%d passed, %d failed\n", len(files)-failed, failed)
			if failed > 0 {
				return exitError{exitInvalid}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "run every shipped scenario")
	cmd.Flags().StringVar(&file, "file", "", "run the scenario in this YAML file")
	cmd.Flags().StringVar(&out, "out", "store", "directory that holds run directories")
	cmd.Flags().DurationVar(&initTimeout, "client-init-timeout", program.DefaultInitTimeout, "for a scenario with a client program: how long the program may take to answer init, instead of its client.init_timeout (an interpreter importing its library takes a second; a JVM longer on a loaded machine)")
	programFlags(cmd.Flags(), programs)
	runtimeParams = runtimeFlags(cmd.Flags())
	return cmd
}

// setClientInitTimeout gives d to the client program of every scenario
// of files that has one; none having one is a mistake worth a line.
func setClientInitTimeout(files []*scenario.File, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("--client-init-timeout %s: give how long a program may take to answer init, such as 30s", d)
	}
	some := false
	for _, f := range files {
		has, err := f.SetClientInitTimeout(d)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", f.Name, err)
		}
		some = some || has
	}
	if !some {
		return errors.New("--client-init-timeout: none of these scenarios tests a client program (client: in its file)")
	}
	return nil
}

func pickScenarios(names []string, all bool, file string) ([]*scenario.File, error) {
	switch {
	case file != "" && (all || len(names) > 0):
		return nil, errors.New("give --file, --all or scenario names, not several")
	case file != "":
		f, err := scenario.ReadFile(file)
		if err != nil {
			return nil, err
		}
		return []*scenario.File{f}, nil
	}
	shipped, err := scenario.Catalogue()
	if err != nil {
		return nil, err
	}
	if all {
		return shipped, nil
	}
	if len(names) == 0 {
		return nil, errors.New("name a scenario (lockcheck scenario list), or pass --all or --file FILE")
	}
	byName := map[string]*scenario.File{}
	for _, f := range shipped {
		byName[f.Name] = f
	}
	var out []*scenario.File
	for _, n := range names {
		f, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("no scenario %q (lockcheck scenario list shows them)", n)
		}
		out = append(out, f)
	}
	return out, nil
}

// runScenario runs one scenario and prints expected against observed. It
// reports whether every expectation was met.
func runScenario(ctx context.Context, w io.Writer, f *scenario.File, out string, programs catalog.Programs, runParams map[string]string) (bool, error) {
	fmt.Fprintf(w, "\n== %s: %s\n", f.Name, f.Title)
	o, err := scenario.Run(ctx, f, out, programs, runParams)
	if err != nil {
		return false, fmt.Errorf("scenario %s: %w", f.Name, err)
	}
	if path, err := repro.WriteScenario(o.Dir, f, o.History, o.Result); err != nil {
		// The comparison stands on its own, as lockcheck check's verdict
		// does without a repro.yaml.
		slog.Warn("no repro.yaml for this scenario run", "scenario", f.Name, "err", err)
	} else if path != "" {
		// The report links the reproduction it now has.
		if err := results.WriteAll(o.Dir, o.History, o.Result); err != nil {
			return false, err
		}
		defer fmt.Fprintf(w, "   repro: %s\n", results.ReproCommand(path))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "   \tEXPECTED\tOBSERVED\t")
	for _, l := range o.Comparison.Lines {
		mark := "ok"
		for _, m := range o.Comparison.Mismatches {
			if m == l {
				mark = "MISMATCH"
			}
		}
		fmt.Fprintf(tw, "   %s\t%s\t%s\t%s\n", l.What, l.Expected, l.Observed, mark)
	}
	tw.Flush()
	verdict := "PASS"
	if !o.Comparison.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "   %s  (verdict %s; report: %s/report.html)\n", verdict, o.Result.Valid, o.Dir)
	return o.Comparison.OK(), nil
}
