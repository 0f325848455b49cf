package cli

import (
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// commandLine is the lockcheck command line that repeats cmd as the user
// gave it: lead (the command and any arguments that must come first), then
// every flag the user set except those named in skip, each printed as
// lockcheck parses it back (flagArgs), then the seed, which lockcheck may
// have picked. Every command line lockcheck prints for a run to repeat it
// (run's, soak's, compare's and each compare cell's, which the report,
// the summary and repro.yaml's source show) comes from here.
func commandLine(cmd *cobra.Command, lead []string, seed int64, skip ...string) []string {
	line := slices.Clone(lead)
	skip = append(skip, "seed")
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if !slices.Contains(skip, fl.Name) {
			line = append(line, flagArgs(fl)...)
		}
	})
	return append(line, "--seed", strconv.FormatInt(seed, 10))
}

// reproduce is the command line that runs the same test (or comparison)
// again: the flags the user set, and the seed even when lockcheck picked it.
func reproduce(cmd *cobra.Command, seed int64) []string {
	return commandLine(cmd, []string{"lockcheck", cmd.Name()}, seed)
}

// flagArgs prints one flag so that lockcheck parses it back to the same
// value: a flag that takes no value (a boolean such as --wipe) alone, or
// as --flag=value when it is not at its implied value (--wipe=false),
// since "--wipe true" is the flag and an argument; a list as the values
// given, comma-separated (pflag's own String() brackets them).
func flagArgs(fl *pflag.Flag) []string {
	name := "--" + fl.Name
	value := fl.Value.String()
	if list, ok := fl.Value.(pflag.SliceValue); ok {
		value = strings.Join(list.GetSlice(), ",")
	}
	if fl.NoOptDefVal != "" {
		if value == fl.NoOptDefVal {
			return []string{name}
		}
		return []string{name + "=" + value}
	}
	return []string{name, value}
}
