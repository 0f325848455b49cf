package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockcheck/lockcheck/results"
)

func newMergeCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "merge DIR...",
		Short: "Merge the comparisons of several machines (the shards of one matrix) into one",
		Long: `merge reads the comparisons in each DIR (a folder lockcheck compare --out
wrote, or a comparison folder in it): typically the shards of one matrix,
run with lockcheck compare --shard I/N --seed S on N machines and gathered
by CI. It writes <out>/<timestamp>-compare/ holding compare.html,
compare.json and junit.xml over every cell, in the matrix's order, with each
cell's run directory copied in, and <out>/index.html listing the store.

The shards must share --seed and --time-limit, and no cell may come twice.

Exit codes as for compare: 0 every cell's verdict is true, 1 some verdict is
false, 2 some cell is unknown, could not run, or a shard was interrupted.`,
		Example: `  lockcheck merge shard-1 shard-2 shard-3 --out nightly`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dirs, err := results.FindComparisons(args)
			if err != nil {
				return err
			}
			line := append([]string{"lockcheck", "merge", "--out", out}, args...)
			dir, c, err := results.MergeComparisons(out, dirs, line, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "merged %d comparisons, %d cells: %s\n", len(dirs), len(c.Cells), dir)
			return compareExit(c)
		},
	}
	cmd.Flags().StringVar(&out, "out", "store", "folder to write the merged comparison and the store index into")
	return cmd
}
