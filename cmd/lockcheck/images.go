package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockcheck/lockcheck/harness/container"
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
	var (
		redisServer, redisTag, etcdTag string
		force                          bool
	)
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the images of the docker runtime from what is installed here, with no registry",
		Long: `build makes the two images --runtime docker uses by default, without a
registry or a base image, and imports them into the local Docker engine:

  ` + container.RedisImage + `  the installed redis-server (also run as redis-sentinel), the
                         libraries ldd lists for it, and libfaketime for clock faults
  ` + container.EtcdImage + `   this lockcheck executable, which runs as an etcd member under
                         the name etcd, with the libraries it links (none if static)

An image that is already there and was built from the same files is kept.
To test other servers, pass --redis-image or --etcd-image to run (docker/
has Dockerfiles for the official images).`,
		Example: `  lockcheck images build
  lockcheck run --runtime docker --backend sentinel`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			redis, err := container.RedisRecipe(redisTag, redisServer)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cli, err := container.Connect(ctx, nil)
			if err != nil {
				return err
			}
			defer cli.Close()
			for _, recipe := range []container.ImageRecipe{redis, container.EtcdRecipe(etcdTag, self)} {
				start := time.Now()
				res, err := container.Build(ctx, cli, recipe, force)
				if err != nil {
					return err
				}
				what := "up to date"
				if res.Built {
					what = fmt.Sprintf("built in %.1fs", time.Since(start).Seconds())
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%-24s %s (%d files, %.1f MB, source %s)\n", res.Tag, what, res.Files, float64(res.Bytes)/1e6, res.Digest)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&redisServer, "redis-server", "redis-server", "redis-server executable to put into the Redis image (looked up on PATH)")
	fl.StringVar(&redisTag, "redis-image", container.RedisImage, "tag of the Redis image")
	fl.StringVar(&etcdTag, "etcd-image", container.EtcdImage, "tag of the etcd image")
	fl.BoolVar(&force, "force", false, "build even when an up-to-date image is there")
	return cmd
}
