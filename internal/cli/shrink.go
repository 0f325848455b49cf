package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/results"
	"github.com/lockcheck/lockcheck/scenario"
	"github.com/lockcheck/lockcheck/scenario/shrink"
)

// MinimalFile is the smallest reproduction shrink found, beside the one it
// started from.
const MinimalFile = "minimal.yaml"

func newShrinkCmd() *cobra.Command {
	var (
		tries    int
		fail     []string
		budget   time.Duration
		out      string
		programs = catalog.Programs{}
		// runtimeParams gives --runtime and the images as run params.
		runtimeParams func() (map[string]string, error)
		// from, f and runParams are what PreRunE read: the scenario's
		// file, the scenario and the run params.
		from      string
		f         *scenario.File
		runParams map[string]string
	)
	cmd := &cobra.Command{
		Use:   "shrink RUN_DIR|FILE",
		Short: "Shrink a failing run's reproduction to the smallest scenario that still fails",
		Long: `shrink starts from the repro.yaml a run that ended false left in RUN_DIR (or
from a scenario FILE), replays it --tries times and says how often it
failed the same checks: one that failed in none of them is refused (exit 2,
nothing written), since a shrink claims only what it replayed. It then
searches for a smaller scenario that still fails the same checks: it drops
timeline steps (halves first, then one by one, the latest first, each
candidate ending a little after its last step), removes clients, then
halves pauses and clock jumps, starts steps earlier and halves the time
limit.
Each candidate runs --tries times and is kept only when every try fails the
same checks with its steps landed (as many as its expect.landed asks; a
run's repro.yaml asks one). It prints each candidate, stops when no
step can be removed or --budget runs out, and writes the smallest scenario
found to minimal.yaml beside the one it started from, with an explain that
says how often each replayed. A run that ended true has nothing to shrink:
shrink refuses it (exit 2).

A failure that takes many faults to build up (Redlock's fences from INCR
regress only after several restarts wiped the counters) keeps the timeline
long when every failed check must come back; --fail lease_safety shrinks
toward the broken lock alone.`,
		Args: cobra.ExactArgs(1),
		// The scenario is read and preflighted before anything runs.
		PreRunE: func(cmd *cobra.Command, args []string) (err error) {
			if tries < 1 {
				return fmt.Errorf("--tries %d: expected at least 1", tries)
			}
			if budget <= 0 {
				return fmt.Errorf("--budget %s: expected a positive duration such as 10m", budget)
			}
			if from, err = shrinkSource(args[0]); err != nil {
				return err
			}
			if f, err = scenario.ReadFile(from); err != nil {
				return err
			}
			if f, err = failOnly(f, fail); err != nil {
				return err
			}
			if runParams, err = runtimeParams(); err != nil {
				return err
			}
			if out == "" {
				out = filepath.Join(filepath.Dir(from), "shrink-runs")
			}
			if _, err := f.Plan(out, programs, runParams); err != nil {
				return fmt.Errorf("%s: %w", from, err)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "shrinking %s: %d steps, %d clients, time limit %s; each candidate %d times, budget %s\n",
				from, len(f.Timeline), f.Clients, f.TimeLimit.D(), tries, budget)
			// A run of each candidate that reproduced, for the minimal
			// one's write-up.
			reproduced := map[*scenario.File]*checker.Result{}
			run := func(ctx context.Context, c *scenario.File) (bool, error) {
				o, err := scenario.Run(ctx, c, out, programs, runParams)
				if err != nil {
					return false, err
				}
				if !o.Comparison.OK() {
					m := o.Comparison.Mismatches[0]
					return false, fmt.Errorf("%s: %s, expected %s", m.What, m.Observed, m.Expected)
				}
				reproduced[c] = o.Result
				return true, nil
			}
			res, err := shrink.Shrink(ctx, f, run, shrink.Options{Tries: tries, Budget: budget, Log: w})
			if res.Minimal == nil {
				// The starting scenario never reproduced (or the search
				// stopped before it could tell): nothing to claim.
				return fmt.Errorf("shrink %s: %w", from, err)
			}
			minimal := describeMinimal(f, res, tries, reproduced[res.Minimal])
			path := filepath.Join(filepath.Dir(from), MinimalFile)
			data, merr := minimal.Marshal()
			if merr != nil {
				return merr
			}
			if werr := os.WriteFile(path, data, 0o644); werr != nil {
				return werr
			}
			note := "no candidate can be made smaller"
			switch {
			case res.OutOfBudget:
				note = "the budget ran out: the smallest found so far"
			case err != nil:
				note = "interrupted: the smallest found so far"
			}
			fmt.Fprintf(w, "the starting scenario reproduced in %d of %d replays; %d candidates tried, %d kept; %s\n%s\nminimal: %s\nrerun:   %s\n",
				res.Reproduced, res.Replays, res.Tried, res.Kept, note, minimal.Explain, path, results.ReproCommand(path))
			return err
		},
	}
	cmd.Flags().IntVar(&tries, "tries", 3, "replays of the starting scenario (its replay rate) and runs of each candidate; a candidate is kept only when every one fails the same checks")
	cmd.Flags().StringSliceVar(&fail, "fail", nil, "checks a candidate must fail, comma-separated, among those the scenario expects to fail (default: all of them)")
	cmd.Flags().DurationVar(&budget, "budget", 10*time.Minute, "time the whole search may take; when it runs out, the smallest scenario found so far is written")
	cmd.Flags().StringVar(&out, "out", "", "directory that holds the candidates' run directories (default: shrink-runs beside the scenario)")
	programFlags(cmd.Flags(), programs)
	runtimeParams = runtimeFlags(cmd.Flags())
	return cmd
}

// shrinkSource is the scenario to shrink: a file as given, or the
// repro.yaml of a run directory, which a run that ended true has none of.
func shrinkSource(arg string) (string, error) {
	if info, err := os.Stat(arg); err == nil && !info.IsDir() {
		return arg, nil
	}
	dir, err := results.OpenRunDir(arg)
	if err != nil {
		return "", err
	}
	res, err := results.ReadResults(dir)
	if err != nil {
		return "", err
	}
	if res.Valid != checker.Invalid {
		return "", fmt.Errorf("%s ended %s: there is no failure to shrink (shrink takes a run that ended false)", arg, res.Valid)
	}
	path := filepath.Join(dir, results.ReproFile)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s has no %s: run lockcheck check %s to write it", arg, results.ReproFile, arg)
	}
	return path, nil
}

// failOnly is f expecting only the checks named to fail (all it expects
// when none are named); each must be one f expects to fail.
func failOnly(f *scenario.File, checks []string) (*scenario.File, error) {
	if len(checks) == 0 {
		return f, nil
	}
	for _, c := range checks {
		if !slices.Contains(f.Expect.Fail, c) {
			return nil, fmt.Errorf("--fail %s: %s does not expect %s to fail (it expects %s); name some of those",
				c, f.Name, c, strings.Join(f.Expect.Fail, ", "))
		}
	}
	c := *f
	c.Expect.Fail = checks
	return &c, nil
}

// describeMinimal names the minimal scenario of res and tells, in its
// explain, only what runs showed: how often the starting scenario
// reproduced, that each smaller one kept failed in all of its tries, and
// what was left (Incident, from run, a run of it that reproduced).
func describeMinimal(from *scenario.File, res shrink.Outcome, tries int, run *checker.Result) *scenario.File {
	m := res.Minimal
	c := *m
	c.Name = strings.TrimPrefix(from.Name, "repro-") + "-minimal"
	c.Title = fmt.Sprintf("Minimal reproduction of %s (%s)", strings.TrimPrefix(from.Name, "repro-"), strings.Join(m.Expect.Fail, ", "))
	failed := strings.Join(m.Expect.Fail, ", ")
	replayed := fmt.Sprintf("The scenario shrink started from (%s, %d clients, %s) failed %s in %d of %d replays.",
		plural(len(from.Timeline), "step"), from.Clients, from.TimeLimit.D(), failed, res.Reproduced, res.Replays)
	kept := "No smaller scenario failed them in every one of its tries: this is that scenario."
	if res.Kept > 0 {
		kept = fmt.Sprintf("This one (%s, %d clients, %s) failed them in each of its %d tries.",
			plural(len(m.Timeline), "step"), m.Clients, m.TimeLimit.D(), tries)
	}
	c.Explain = replayed + " " + kept + " " + m.Incident(run)
	return &c
}
