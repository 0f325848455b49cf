package harness

import (
	"context"
	"io"
	"log"
	"testing"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
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
