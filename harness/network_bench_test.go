package harness

import (
	"context"
	"io"
	"log"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/program"
)

// BenchmarkGrantsThroughProxies measures what the process runtime's
// proxies cost a client: one client acquires and releases a lock back to
// back, on loopback directly and through the proxies with no fault, on a
// single Redis, an etcd cluster and a ZooKeeper ensemble (a grant is a
// round between the members, through their proxies too) and a PostgreSQL
// primary. Each run starts the topology afresh, so a fixed count keeps the
// starts few:
//
//	go test ./harness -run '^$' -bench GrantsThroughProxies -benchtime 2000x
func BenchmarkGrantsThroughProxies(b *testing.B) {
	// The ZooKeeper client logs every connection, between the result lines.
	defer log.SetOutput(log.Writer())
	log.SetOutput(io.Discard)
	for _, backend := range []string{"redis", "etcd", "zookeeper", "postgres"} {
		for _, network := range []string{NetworkDirect, NetworkProxy} {
			b.Run(backend+"/"+network, func(b *testing.B) {
				benchGrants(b, backend, network == NetworkProxy)
			})
		}
	}
}

func benchGrants(b *testing.B, backend string, proxied bool) {
	bk, _, err := catalog.Lookup(backend, "")
	if err != nil {
		b.Fatal(err)
	}
	p := newProcs()
	dir := b.TempDir()
	defer p.killAll(5 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes, network, err := startNodes(ctx, p, bk.Nodes(nil, map[string]string{}), dir, proxied)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, n := range nodes {
			n.Stop()
		}
		if network != nil {
			network.Close() //nolint:errcheck // a benchmark's end
		}
	}()
	spec := catalog.Spec{Backend: backend, TTL: 10 * time.Second, Timeout: 5 * time.Second}
	for _, n := range nodes {
		spec.Addrs = append(spec.Addrs, n.addr())
	}
	if bk.Ready != nil {
		eps := make([]backends.Endpoint, len(nodes))
		for i, n := range nodes {
			eps[i] = n.ep
		}
		if err := bk.Ready(ctx, eps); err != nil {
			b.Fatal(err)
		}
	}
	if proxied {
		spec.Source = clientSource(0)
		network.Name(spec.Source, clientLink(0))
	}
	lock, err := bk.Open(spec, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer lock.Close()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		g, err := lock.Acquire(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := lock.Release(ctx, "bench", g); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "grants/s")
}

// BenchmarkProgramThroughRelays measures what a lock client program's
// links cost it: the Go reference client (examples/clients/go) acquires
// and releases back to back on a single Redis, on loopback directly and
// through its slot's relay and the node's proxy, as a run with a network
// fault hands it (programlinks.go). The metrics are grants/s and the
// acquire's p50 and p99 in µs:
//
//	go test ./harness -run '^$' -bench ProgramThroughRelays -benchtime 2000x
func BenchmarkProgramThroughRelays(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "goclient")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "examples", "clients", "go")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the Go reference client: %v: %s", err, out)
	}
	for _, network := range []string{NetworkDirect, NetworkProxy} {
		b.Run(network, func(b *testing.B) { benchProgram(b, bin, network == NetworkProxy) })
	}
}

func benchProgram(b *testing.B, bin string, relayed bool) {
	bk, _, err := catalog.Lookup("redis", "")
	if err != nil {
		b.Fatal(err)
	}
	p := newProcs()
	defer p.killAll(5 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes, network, err := startNodes(ctx, p, bk.Nodes(nil, map[string]string{}), b.TempDir(), relayed)
	if err != nil {
		b.Fatal(err)
	}
	eps := make([]backends.Endpoint, len(nodes))
	for i, n := range nodes {
		eps[i] = n.ep
	}
	defer func() {
		for _, n := range nodes {
			n.Stop()
		}
		if network != nil {
			network.Close() //nolint:errcheck // a benchmark's end
		}
	}()
	if relayed {
		pl := newProgramLinks(&proxyLinks{network})
		defer pl.close()
		if eps, err = pl.endpoints(0, eps); err != nil {
			b.Fatal(err)
		}
	}
	lock, err := program.Open(program.Options{
		Client:  backends.Client{TTL: 10 * time.Second, Fence: true, Timeout: 5 * time.Second},
		Command: []string{bin}, Slot: "c0", Addrs: backends.Addrs(eps),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer lock.Close()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		t0 := time.Now()
		g, err := lock.Acquire(ctx, "bench")
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := lock.Release(ctx, "bench", g); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "grants/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
