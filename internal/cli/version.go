package cli

import (
	"github.com/spf13/cobra"

	"github.com/lockcheck/lockcheck/internal/buildinfo"
)

// newVersionCmd prints the build lockcheck --version prints.
func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print lockcheck's module version, VCS revision, whether its tree was modified, and its Go version",
		Long: `version prints which lockcheck this is, from the binary's own build
information: the module version, the VCS revision it was built from, whether
that checkout had uncommitted changes, and the Go version that built it.
results.json, compare.json, soak.json and the report carry the same
("lockcheck" key).

go run and go test record no VCS information, and neither does go build in
a git worktree or with GOFLAGS=-buildvcs=false: the revision is then
"unknown". make build records it in every case.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write([]byte(buildinfo.Current().String()))
			return err
		},
	}
}
