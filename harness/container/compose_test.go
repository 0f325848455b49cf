package container

import (
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/lockcheck/lockcheck/backends/catalog"
	_ "github.com/lockcheck/lockcheck/backends/catalog/withetcd" // the etcd backend
)

// docker/compose.yaml brings up, for each backend, the nodes lockcheck's
// own topology has, under the same names (a single Redis is "redis": the
// name redis-0 belongs to the Sentinel topology in the same file).
func TestComposeFileHasEachTopologysNodes(t *testing.T) {
	data, err := os.ReadFile("../../docker/compose.yaml")
	require.NoError(t, err)
	var file struct {
		Services map[string]struct {
			Profiles []string `yaml:"profiles"`
			Image    string   `yaml:"image"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(data, &file))
	for _, backend := range []string{"redis", "sentinel", "redlock", "etcd"} {
		t.Run(backend, func(t *testing.T) {
			b, _, err := catalog.Lookup(backend, "")
			require.NoError(t, err)
			var want, got []string
			for _, s := range b.Nodes(catalog.Programs{}, nil) {
				want = append(want, s.Name)
			}
			if backend == "redis" {
				want = []string{"redis"}
			}
			for name, svc := range file.Services {
				if slices.Contains(svc.Profiles, backend) {
					got = append(got, name)
					assert.NotEmpty(t, svc.Image, name)
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			assert.Equal(t, want, got)
		})
	}
}
