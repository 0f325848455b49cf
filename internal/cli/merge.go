package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/results"
)

func newMergeCmd() *cobra.Command {
	var (
		out       string
		withSoaks bool
	)
	cmd := &cobra.Command{
		Use:   "merge DIR...",
		Short: "Merge the comparisons, sweeps or soaks of several machines (the shards of one matrix) into one",
		Long: `merge reads the comparisons, sweeps and soaks in each DIR (a folder lockcheck
compare, sweep or soak --out wrote, or such a folder in it): typically the
shards of one matrix, run with --shard I/N --seed S on N machines and
gathered by CI.

Comparisons are merged into <out>/<timestamp>-compare/ holding
compare.html, compare.json and junit.xml over every cell, in the matrix's
order, with each cell's run directory copied in, and <out>/index.html
listing the store. They must share --seed and --time-limit, and no cell may
come twice.

Sweeps are merged into <out>/<timestamp>-sweep/ holding sweep.html,
sweep.json and junit.xml over every run, in the grid's order, with each
run directory copied in. They must share --seed, --seeds, --time-limit and
the grid, and no run may come twice.

Soaks are merged when DIRs hold no comparison, or with --soaks, into
<out>/<timestamp>-soaks/ holding each soak directory
copied in, soaks.json (every soak's soak.json, in a list) and junit.xml
(one test suite per soak, a case per segment). They must share --seed,
--duration and --segment, and no soak may come twice.

Exit codes as for compare, sweep and soak: 0 every verdict is true, 1 some verdict
is false, 2 some cell or soak is unknown, could not run, or a shard was
interrupted.`,
		Example: `  lockcheck merge shard-1 shard-2 shard-3 --out nightly`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			comparisons, soaks, sweeps, err := results.FindMergeable(args)
			if err != nil {
				return err
			}
			if len(comparisons) > 0 && !withSoaks {
				soaks = nil // a store's older soaks are not asked for
			}
			code := exitValid
			if len(comparisons) > 0 {
				line := append([]string{"lockcheck", "merge", "--out", out}, args...)
				dir, c, err := results.MergeComparisons(out, comparisons, line, time.Now())
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "merged %d comparisons, %d cells: %s\n", len(comparisons), len(c.Cells), dir)
				if note := results.BuildsNote("comparisons", c.Builds); note != "" {
					fmt.Fprintln(cmd.OutOrStdout(), "note: "+note)
				}
				if e, ok := compareExit(c).(exitError); ok {
					code = e.code
				}
			}
			if len(sweeps) > 0 {
				line := append([]string{"lockcheck", "merge", "--out", out}, args...)
				dir, s, err := results.MergeSweeps(out, sweeps, line, time.Now())
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "merged %d sweeps, %d runs of %d cells: %s\n", len(sweeps), len(s.Runs), len(s.Cells), dir)
				if e, ok := sweepExit(s).(exitError); ok {
					code = max(code, e.code)
				}
			}
			if len(soaks) > 0 {
				dir, merged, err := results.MergeSoaks(out, soaks, time.Now())
				if err != nil {
					return err
				}
				segments, worst := 0, checker.Valid
				for _, s := range merged {
					segments += len(s.Segments)
					worst = worseVerdict(worst, s.Valid)
				}
				if e, ok := verdictExit(worst).(exitError); ok {
					code = max(code, e.code)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "merged %d soaks, %d segments: %s\n", len(merged), segments, dir)
				if note := results.BuildsNote("soaks", results.SoakBuilds(merged)); note != "" {
					fmt.Fprintln(cmd.OutOrStdout(), "note: "+note)
				}
			}
			if code != exitValid {
				return exitError{code}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&withSoaks, "soaks", false, "merge the soaks in DIRs too when they also hold comparisons (without comparisons, soaks are merged anyway)")
	cmd.Flags().StringVar(&out, "out", "store", "folder to write the merged comparison and the store index into")
	return cmd
}
