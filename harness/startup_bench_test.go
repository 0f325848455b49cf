package harness

import (
	"context"
	"testing"
	"time"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/harness/container/containertest"
	"github.com/lockcheck/lockcheck/history"
)

// BenchmarkTopologyStart measures how long each backend's topology takes
// from nothing to ready (every node answering and the backend's own
// readiness: replicas in sync, sentinels agreeing, an etcd or ZooKeeper
// leader) and back to nothing, under each runtime:
//
//	go test ./harness -run '^$' -bench TopologyStart -benchtime 5x
func BenchmarkTopologyStart(b *testing.B) {
	for _, rt := range []string{RuntimeProcess, RuntimeDocker} {
		for _, backend := range []string{"redis", "sentinel", "redlock", "etcd", "zookeeper"} {
			b.Run(rt+"/"+backend, func(b *testing.B) {
				params := map[string]string{ParamRuntime: rt}
				if rt == RuntimeDocker {
					images := containertest.Images(b, containertest.Engine(b))
					for _, img := range catalog.Images() {
						params[img.Param()] = images[img.Kind]
					}
				}
				cfg := Config{Run: history.RunConfig{Backend: backend, Params: params}}
				be, _, err := catalog.Lookup(backend, "")
				if err != nil {
					b.Fatal(err)
				}
				specs := be.Nodes(cfg.Programs, params)
				p := newProcs()
				defer p.killAll(5 * time.Second)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					ctx := context.Background()
					top, err := startTopologyFor(ctx, cfg, p, specs, b.TempDir()+"/nodes", nil)
					if err != nil {
						b.Fatal(err)
					}
					if be.Ready != nil {
						eps := top.endpoints()
						readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
						err = be.Ready(readyCtx, eps)
						cancel()
					}
					top.close()
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
