package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/harness"
)

func newImagesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Container images of the docker runtime",
	}
	cmd.AddCommand(newImagesBuildCmd())
	return cmd
}

func newImagesBuildCmd() *cobra.Command {
	var force bool
	images := catalog.Images()
	programs := catalog.Programs{}
	tags := map[*backends.Image]*string{}
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the images of the docker runtime from what is installed here, with no registry",
		Long: `build makes the images --runtime docker uses by default, without a
registry or a base image, and imports them into the local Docker engine:

` + imagesHelp(images) + `
An image that is already there and was built from the same files is kept.
To test other servers, pass ` + imageFlagsHelp(images) + ` to run (docker/
has Dockerfiles for the official images).`,
		Example: `  lockcheck images build
  lockcheck run --runtime docker`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			if harness.Docker == nil {
				return errors.New(`this program has no docker runtime (lockcheck's own command has; a program of yours imports _ "github.com/lockcheck/lockcheck/harness/container/withdocker")`)
			}
			chosen := map[*backends.Image]string{}
			for _, img := range images {
				chosen[img] = *tags[img]
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return harness.Docker.Build(ctx, chosen, programs.Path, self, force, func(line string) { fmt.Fprintln(cmd.OutOrStdout(), line) })
		},
	}
	fl := cmd.Flags()
	var inImages []backends.Program
	for _, img := range images {
		tags[img] = fl.String(img.Param(), img.Tag, "tag of the "+img.Kind+" image")
		for _, p := range img.Programs {
			if !slices.Contains(inImages, p) {
				inImages = append(inImages, p)
				fl.Var(programFlag{programs, p.Name}, p.Name, p.Name+" executable to put into the images that hold it (looked up on PATH)")
			}
		}
	}
	fl.BoolVar(&force, "force", false, "build even when an up-to-date image is there")
	return cmd
}

// imagesHelp lists each image build makes and what goes into it.
func imagesHelp(images []*backends.Image) string {
	var b strings.Builder
	for _, img := range images {
		line := fmt.Sprintf("  %-22s", img.Tag)
		for _, word := range strings.Fields(img.Contents) {
			if len(line)+1+len(word) > 86 {
				b.WriteString(line + "\n")
				line = strings.Repeat(" ", 24)
			}
			line += " " + word
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// imageFlagsHelp names run's flags that pick other images.
func imageFlagsHelp(images []*backends.Image) string {
	flags := make([]string, len(images))
	for i, img := range images {
		flags[i] = "--" + img.Param()
	}
	return strings.Join(flags, " or ")
}
