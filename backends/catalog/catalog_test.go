package catalog

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/etcd"
	"github.com/lockcheck/lockcheck/backends/zookeeper"
)

// Every node of every backend names the image it runs in under the docker
// runtime, and runs either a program its backend declares (so preflight can
// say how to install it) or lockcheck itself. A node with no image runs as
// a local process only, lockcheck itself, and run refuses --runtime docker
// for it.
func TestEveryBackendDeclaresWhatItsNodesNeed(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			b, _, err := Lookup(name, "")
			require.NoError(t, err)
			for _, spec := range b.Nodes(Programs{}, map[string]string{}) {
				if spec.Image == nil {
					assert.Equal(t, self, spec.Program, "%s has no image: it must be lockcheck itself", spec.Name)
					assert.NotEmpty(t, b.Programs, "%s: the server program lockcheck runs as %s", name, spec.Name)
					continue
				}
				assert.NotEmpty(t, spec.Image.Tag, spec.Name)
				assert.Positive(t, spec.Image.Port, spec.Name)
				declared := slices.ContainsFunc(b.Programs, func(p backends.Program) bool { return p.Name == spec.Program })
				assert.True(t, declared || spec.Image.Self != "", "%s runs %s, which %s does not declare", spec.Name, spec.Program, name)
			}
			for _, p := range b.Programs {
				assert.NotEmpty(t, p.Package, "%s: the package that installs %s", name, p.Name)
			}
		})
	}
}

// The backends' flags bind on one command line together, and their
// defaults make a valid run of every backend, whose lease is never shorter
// than the TTL asked for.
func TestBackendFlagsDefaultsApplyToEveryBackend(t *testing.T) {
	fl := pflag.NewFlagSet("run", pflag.ContinueOnError)
	bound := BindFlags(fl)
	require.NoError(t, fl.Parse(nil))
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			s := Settings{Topology: name, TTL: 500 * time.Millisecond, Params: map[string]string{}, Changed: fl.Changed}
			require.NoError(t, bound.Apply(&s))
			b, _, err := Lookup(name, "")
			require.NoError(t, err)
			assert.GreaterOrEqual(t, b.GrantedLease(s.TTL, s.Params), s.TTL)
		})
	}
}

// A set of flags that several backends share is bound once, and every
// image and program is listed once.
func TestSharedDeclarationsAreListedOnce(t *testing.T) {
	seen := map[*Flags]bool{}
	for _, set := range FlagSets() {
		assert.False(t, seen[set], "a flag set bound twice")
		seen[set] = true
	}
	kinds := map[string]bool{}
	for _, img := range Images() {
		assert.False(t, kinds[img.Kind], "image %s listed twice", img.Kind)
		kinds[img.Kind] = true
	}
	names := map[string]bool{}
	for _, p := range AllPrograms() {
		assert.False(t, names[p.Name], "program %s listed twice", p.Name)
		names[p.Name] = true
	}
}

// The lease a backend grants is the one its own client gets: etcd rounds
// a TTL up to whole seconds and to its shortest lease, ZooKeeper clamps it
// to [2, 20] ticks, and the others grant what they are asked.
func TestGrantedLeaseIsTheOneTheBackendGrants(t *testing.T) {
	for _, tt := range []struct {
		backend string
		ttl     time.Duration
		params  map[string]string
		want    time.Duration
	}{
		{"redis", 500 * time.Millisecond, nil, 500 * time.Millisecond},
		{"etcd", 500 * time.Millisecond, nil, time.Second},
		{"etcd", 1500 * time.Millisecond, nil, 2 * time.Second},
		{"etcd", time.Second, map[string]string{etcd.ParamElection: "2s"}, 3 * time.Second},
		{"zookeeper", 500 * time.Millisecond, nil, 500 * time.Millisecond},
		{"zookeeper", 100 * time.Millisecond, nil, 200 * time.Millisecond},
		{"zookeeper", 5 * time.Second, nil, 2 * time.Second},
		{"zookeeper", 5 * time.Second, map[string]string{zookeeper.ParamTick: "500ms"}, 5 * time.Second},
	} {
		t.Run(fmt.Sprintf("%s %s %v", tt.backend, tt.ttl, tt.params), func(t *testing.T) {
			b, _, err := Lookup(tt.backend, "")
			require.NoError(t, err)
			assert.Equal(t, tt.want, b.GrantedLease(tt.ttl, tt.params))
		})
	}
}

// A backend's own flags apply by topology: to its built-in client and to
// a lock client program on its servers alike; a flag of another topology
// is refused naming it, and a setting of how lockcheck's own client talks
// to the servers is refused for a program.
func TestBackendFlagsApplyByTopology(t *testing.T) {
	for _, tt := range []struct {
		topology string
		program  bool
		args     []string
		want     map[string]string // params the flags record
		refused  string
	}{
		{topology: "postgres", program: true, args: []string{"--pooler", "pgbouncer", "--pool-mode", "transaction", "--pool-size", "2"},
			want: map[string]string{"pooler": "pgbouncer", "pool-mode": "transaction", "pool-size": "2"}},
		{topology: "postgres", program: true, args: []string{"--query-exec-mode", "exec"}, refused: "--query-exec-mode is how lockcheck's own PostgreSQL client"},
		{topology: "postgres", args: []string{"--query-exec-mode", "exec"}, want: map[string]string{"query-exec-mode": "exec"}},
		{topology: "zookeeper", program: true, args: []string{"--zookeeper-tick", "250ms"}, want: map[string]string{"zookeeper-tick": "250ms"}},
		{topology: "mariadb", program: true, args: []string{"--wait-timeout", "2s"}, want: map[string]string{"wait-timeout": "2s"}},
		{topology: "mariadb", args: []string{"--ttl", "1500ms"}, want: map[string]string{"wait-timeout": "2s"}},
		{topology: "sentinel", program: true, args: []string{"--down-after", "1500ms"}, want: map[string]string{"down-after": "1.5s"}},
		{topology: "redis", program: true, args: []string{"--pool-size", "3"}, refused: "--pool-size applies to the postgres topology only, and this run's is redis"},
		{topology: "redis", args: []string{"--zookeeper-tick", "250ms"}, refused: "--zookeeper-tick applies to the zookeeper topology only"},
		{topology: "redlock", program: true, args: []string{"--redlock-tries", "3"}, refused: "--redlock-tries is a setting of lockcheck's own Redlock clients"},
	} {
		t.Run(tt.topology+" "+tt.args[0], func(t *testing.T) {
			fl := pflag.NewFlagSet("run", pflag.ContinueOnError)
			ttl := fl.Duration("ttl", 500*time.Millisecond, "")
			bound := BindFlags(fl)
			require.NoError(t, fl.Parse(tt.args))
			s := Settings{Topology: tt.topology, Program: tt.program, TTL: *ttl, Params: map[string]string{}, Changed: fl.Changed}
			err := bound.Apply(&s)
			if tt.refused != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.refused)
				assert.NotContains(t, err.Error(), "\n")
				return
			}
			require.NoError(t, err)
			for k, v := range tt.want {
				assert.Equal(t, v, s.Params[k], k)
			}
			if tt.program {
				assert.NotContains(t, s.Params, "query-exec-mode", "a program is never told how pgx sends statements")
			}
		})
	}
}
