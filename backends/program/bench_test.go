package program

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/redis"
)

// BenchmarkAcquireRelease runs the same Redis recipe (SET NX PX, a fence
// by INCR, a compare-and-delete release) side by side on one redis-server:
// lockcheck's built-in Go client, and the Go reference client
// (examples/clients/go) behind the client protocol. Each iteration is one
// grant and its release; the metrics are grants/s and the acquire's
// latency p50/p99 in µs, so that the protocol's added latency per
// operation is the difference of the two p50s.
//
//	go test -run '^$' -bench AcquireRelease -benchtime 3s ./backends/program/
func BenchmarkAcquireRelease(b *testing.B) {
	addr := startRedis(b)
	bin := buildClient(b)
	client := backends.Client{TTL: time.Second, Fence: true, Timeout: time.Second}
	open := map[string]func() (backends.Lock, error){
		"builtin": func() (backends.Lock, error) {
			return redis.New(redis.Options{Client: client, Addr: addr})
		},
		"protocol": func() (backends.Lock, error) {
			return Open(Options{Client: client, Command: []string{bin}, Slot: "bench", Addrs: []string{addr}})
		},
	}
	for _, name := range []string{"builtin", "protocol"} {
		b.Run(name, func(b *testing.B) {
			l, err := open[name]()
			require.NoError(b, err)
			defer l.Close()
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			key := fmt.Sprintf("bench-%s-%d", name, time.Now().UnixNano())
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				t0 := time.Now()
				g, err := l.Acquire(ctx, key)
				lat = append(lat, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := l.Release(ctx, key, g); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "grants/s")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
