// Package withdocker adds the docker runtime (--runtime docker, lockcheck
// images build) to the program that imports it. It links a Docker client
// and testcontainers, a large dependency: cmd/lockcheck imports it; a
// program of your own that registers a lock (package lockcheck) does not,
// and runs nodes as local processes, unless it imports this package too.
package withdocker

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/harness/container"
)

func init() { harness.Docker = docker{} }

// docker is harness.DockerRuntime over package container.
type docker struct{}

func (docker) CheckImages(ctx context.Context, log *slog.Logger, refs []string) error {
	cli, err := container.Connect(ctx, log)
	if err != nil {
		return err
	}
	defer cli.Close()
	return container.CheckImages(ctx, cli, refs)
}

func (docker) Start(ctx context.Context, specs []backends.NodeSpec, root string, images map[string]string, run string, log *slog.Logger) ([]harness.Container, func(), error) {
	cli, err := container.Connect(ctx, log)
	if err != nil {
		return nil, nil, err
	}
	rt, err := container.New(ctx, cli, container.Options{Images: images, Run: run, Logger: log})
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	nodes, err := rt.StartTopology(ctx, specs, root)
	if err != nil {
		rt.Close()
		cli.Close()
		return nil, nil, err
	}
	out := make([]harness.Container, len(nodes))
	for i, n := range nodes {
		out[i] = n
	}
	return out, func() { rt.Close(); cli.Close() }, nil
}

func (docker) Build(ctx context.Context, images map[*backends.Image]string, program func(string) string, self string, force bool, report func(string)) error {
	// Every recipe first: a missing program is reported before anything
	// is built.
	var recipes []container.ImageRecipe
	for img, tag := range images {
		r, err := container.Recipe(img, tag, program, self)
		if err != nil {
			return err
		}
		recipes = append(recipes, r)
	}
	slices.SortFunc(recipes, func(a, b container.ImageRecipe) int { return strings.Compare(a.Tag, b.Tag) })
	cli, err := container.Connect(ctx, nil)
	if err != nil {
		return err
	}
	defer cli.Close()
	for _, recipe := range recipes {
		start := time.Now()
		res, err := container.Build(ctx, cli, recipe, force)
		if err != nil {
			return err
		}
		what := "up to date"
		if res.Built {
			what = fmt.Sprintf("built in %.1fs", time.Since(start).Seconds())
		}
		report(fmt.Sprintf("%-24s %s (%d files, %.1f MB, source %s)", res.Tag, what, res.Files, float64(res.Bytes)/1e6, res.Digest))
	}
	return nil
}
