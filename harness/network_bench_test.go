package harness

import (
	"context"
	"testing"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/redis"
)

// BenchmarkGrantsThroughProxies measures what the process runtime's
// proxies cost a client: one client acquires and releases a Redis lock
// back to back, on loopback directly and through a proxy with no fault.
//
//	go test ./harness -run '^$' -bench GrantsThroughProxies -benchtime 5s
func BenchmarkGrantsThroughProxies(b *testing.B) {
	for _, proxied := range []bool{false, true} {
		name := NetworkDirect
		if proxied {
			name = NetworkProxy
		}
		b.Run(name, func(b *testing.B) {
			p := newProcs()
			dir := b.TempDir()
			defer p.killAll(5 * time.Second)
			nodes, network, err := startNodes(context.Background(), p, []backends.NodeSpec{redis.Node("redis-0", "")}, dir, proxied)
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				nodes[0].Stop()
				if network != nil {
					network.Close() //nolint:errcheck // a benchmark's end
				}
			}()
			opts := redis.Options{Addr: nodes[0].addr(), TTL: 10 * time.Second, Timeout: time.Second}
			if proxied {
				opts.Source = clientSource(0)
				network.Name(opts.Source, clientLink(0))
			}
			lock, err := redis.New(opts)
			if err != nil {
				b.Fatal(err)
			}
			defer lock.Close()
			ctx := context.Background()
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
		})
	}
}
