package catalog

import (
	"context"
	"fmt"
	"os"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/postgres"
)

func init() {
	Register(Backend{
		Name:     "postgres",
		Variants: postgres.Variants,
		Nodes: func(p Programs, _ map[string]string) []backends.NodeSpec {
			return []backends.NodeSpec{PostgresNode(p)}
		},
		Ready: func(ctx context.Context, all []backends.Endpoint) error {
			return postgres.Prepare(ctx, all[0].Addr())
		},
		PrepareAddrs: func(ctx context.Context, addrs []string) error { return postgres.Prepare(ctx, addrs[0]) },
		Service:      func(all []backends.Endpoint) any { return postgres.NewService(all) },
		Open: func(s Spec, _ backends.Failpoint) (backends.Lock, error) {
			if len(s.Addrs) != 1 {
				return nil, fmt.Errorf("postgres backend needs one address, got %d", len(s.Addrs))
			}
			return postgres.New(postgres.Options{Addr: s.Addrs[0], Variant: s.Variant, Fence: s.Fence, Timeout: s.Timeout})
		},
		Programs:         []backends.Program{postgres.Server},
		Signature:        []string{"kill-session"},
		RequiresResource: map[string]string{postgres.Xact: "postgres"},
		RunNode:          postgres.RunNodeFromEnv,
	})
}

// PostgresNode is the PostgreSQL node pg-0, for the postgres backend and
// for --resource postgres: lockcheck itself (in tests, the test binary)
// runs initdb and the server found as programs say.
func PostgresNode(p Programs) backends.NodeSpec {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	server, err := postgres.Server.Find(p.Path(postgres.Server.Name))
	if err != nil {
		server = p.Path(postgres.Server.Name) // preflight reports it
	}
	return postgres.Node(postgres.Primary, self, server)
}
