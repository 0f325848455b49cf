// Package containertest gives tests of the docker runtime a Docker engine
// and lockcheck's images, or skips them saying plainly why.
package containertest

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/harness/container"
)

// testTag is the tag of an image tests build from their own binary (which
// runs as an etcd member under the name etcd, like lockcheck does), so that
// a test never replaces the image lockcheck images build made:
// lockcheck/etcd:test.
func testTag(img *backends.Image) string {
	return "lockcheck/" + img.Kind + ":test"
}

// Engine connects to the local Docker engine, or skips the test.
func Engine(t testing.TB) *testcontainers.DockerClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := container.Connect(ctx, nil)
	if err != nil {
		t.Skipf("SKIPPED: no Docker engine answers on this machine, so the docker runtime is not tested here: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Images builds the image of every backend's nodes, those holding installed
// servers (redis-server) from them and those holding lockcheck itself (etcd)
// from the test binary, each once (an up-to-date image is kept), and
// returns them by kind.
func Images(t testing.TB, cli *testcontainers.DockerClient) map[string]string {
	t.Helper()
	ctx := context.Background()
	self, err := os.Executable()
	require.NoError(t, err)
	out := map[string]string{}
	for _, img := range catalog.Images() {
		tag := img.Tag
		if img.Self != "" {
			tag = testTag(img)
		}
		recipe, err := container.Recipe(img, tag, func(name string) string { return name }, self)
		require.NoError(t, err)
		_, err = container.Build(ctx, cli, recipe, false)
		require.NoError(t, err)
		out[img.Kind] = tag
	}
	return out
}

// Leftovers counts the containers and networks of this test process that
// still exist.
func Leftovers(t testing.TB, cli *testcontainers.DockerClient) int {
	t.Helper()
	owner, err := container.Owner()
	require.NoError(t, err)
	filter := client.Filters{}.Add("label", container.LabelOwner+"="+owner)
	cs, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: filter})
	require.NoError(t, err)
	ns, err := cli.NetworkList(context.Background(), client.NetworkListOptions{Filters: filter})
	require.NoError(t, err)
	return len(cs.Items) + len(ns.Items)
}

// Rules lists the iptables rules in the network namespace of each running
// container of this test process, one after another: what the link faults
// put there.
func Rules(ctx context.Context, cli *testcontainers.DockerClient) (string, error) {
	owner, err := container.Owner()
	if err != nil {
		return "", err
	}
	filter := client.Filters{}.Add("label", container.LabelOwner+"="+owner)
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{Filters: filter})
	if err != nil {
		return "", err
	}
	var all strings.Builder
	for _, c := range cs.Items {
		res, err := cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil || res.Container.State == nil || res.Container.State.Pid == 0 {
			continue // gone or stopped meanwhile
		}
		out, err := exec.CommandContext(ctx, "nsenter", "-t", strconv.Itoa(res.Container.State.Pid), "-n", "iptables", "-S").Output()
		if err == nil {
			all.Write(out)
		}
	}
	return all.String(), nil
}
