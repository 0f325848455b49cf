package postgres

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockcheck/lockcheck/backends"
)

// ParamPooler is the run param that puts a pooler in front of the primary
// (--pooler pgbouncer).
const ParamPooler = "pooler"

// Pooler is PgBouncer, the connection pooler a run may put in front of the
// primary; only such runs need it. Debian installs it in /usr/sbin.
var Pooler = backends.Program{Name: "pgbouncer", Package: "pgbouncer", Search: "/usr/sbin/pgbouncer", Param: ParamPooler}

// PoolerNodeEnv marks a process lockcheck started as a PgBouncer node.
const PoolerNodeEnv = "LOCKCHECK_PGBOUNCER_NODE"

// PoolerName is the pooler's node.
const PoolerName = "pgbouncer-0"

// PoolerLog is PgBouncer's log inside its node's directory, beside its
// pgbouncer.ini and userlist.txt.
const PoolerLog = "pgbouncer.log"

// PgBouncer's pool modes: a client keeps its server connection for its
// whole session, or only for a transaction (a statement outside one).
const (
	PoolSession     = "session"
	PoolTransaction = "transaction"
)

// Pool is how the pooler shares server connections among the clients.
type Pool struct {
	Mode string // PoolSession or PoolTransaction
	// Size is the number of server connections (default_pool_size):
	// fewer than the clients, so that they share them.
	Size int
	// IdleTimeout, if set, closes a server connection idle that long in
	// the pool (server_idle_timeout), which frees the advisory locks a
	// transaction-mode client left on it, and a client connection idle
	// that long (client_idle_timeout). PgBouncer closes no client that has
	// a server connection, which in session mode every client has: a
	// holder paused there keeps its lock. 0 keeps PgBouncer's defaults:
	// 600 s for servers, no client timeout.
	IdleTimeout time.Duration
}

// DefaultPoolSize is the pool's size unless told otherwise.
const DefaultPoolSize = 2

// PoolerNode describes the PgBouncer node in front of the primary, which
// it reaches at the primary's client address: program is the lockcheck
// executable, which writes PgBouncer's configuration into the node's
// directory and runs pgbouncer, found at pgbouncer, as its child.
func PoolerNode(program, pgbouncer string, pool Pool) backends.NodeSpec {
	return backends.NodeSpec{
		Name:    PoolerName,
		Program: program,
		Ports:   1,
		Args: func(self backends.Endpoint, all []backends.Endpoint) []string {
			args := []string{
				"--pgbouncer", pgbouncer,
				"--dir", self.Dir,
				"--listen", self.BindAddr(),
				"--port", strconv.Itoa(self.ListenPort(0)),
				"--pool-mode", pool.Mode,
				"--pool-size", strconv.Itoa(pool.Size),
				"--idle-timeout", pool.IdleTimeout.String(),
			}
			for _, e := range all {
				if e.Name == Primary {
					args = append(args, "--server", e.Addr())
				}
			}
			return args
		},
		Env: []string{PoolerNodeEnv + "=1"},
		// PgBouncer answers its admin console itself: a probe that needed
		// a server connection would wait behind the clients in session
		// mode, where each keeps one for as long as it is connected.
		Ready: func(ctx context.Context, addr string) error {
			_, err := poolerVersion(ctx, addr)
			return err
		},
		Version: poolerVersion,
	}
}

// poolerVersion asks PgBouncer's admin console, which speaks the simple
// query protocol only.
func poolerVersion(ctx context.Context, addr string) (string, error) {
	cfg, err := ConnConfig(addr, time.Second)
	if err != nil {
		return "", err
	}
	cfg.Database = "pgbouncer"
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var v string
	err = conn.QueryRow(ctx, "SHOW VERSION").Scan(&v)
	return v, err
}

// runPooler writes the pooler's configuration and runs PgBouncer until it
// exits. Like a PostgreSQL node it runs as an unprivileged user when root
// starts it: PgBouncer refuses to run as root.
func runPooler(args []string) error {
	fl := flag.NewFlagSet("pgbouncer-node", flag.ContinueOnError)
	program := fl.String("pgbouncer", Pooler.Name, "pgbouncer executable")
	dir := fl.String("dir", ".", "node directory")
	listen := fl.String("listen", backends.Loopback, "address to listen on")
	port := fl.Int("port", 6432, "port")
	server := fl.String("server", "", "the primary's address")
	mode := fl.String("pool-mode", PoolTransaction, "session or transaction")
	size := fl.Int("pool-size", DefaultPoolSize, "server connections")
	idle := fl.Duration("idle-timeout", 0, "client and server idle timeout (0: PgBouncer's defaults)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *server == "" {
		return errors.New("no --server: the pooler fronts the primary, " + Primary)
	}
	ini, err := poolerConfig(*dir, *listen, *port, *server, Pool{Mode: *mode, Size: *size, IdleTimeout: *idle})
	if err != nil {
		return err
	}
	return backends.RunUnprivileged(*program, []string{ini}, filepath.Join(*dir, PoolerLog), true)
}

// poolerConfig writes pgbouncer.ini and its auth file into dir and
// returns the ini's path. Clients are trusted on loopback, as the
// PostgreSQL nodes trust them; PgBouncer listens on no Unix socket, so
// that nothing of it is left outside its directory.
func poolerConfig(dir, listen string, port int, server string, pool Pool) (string, error) {
	host, serverPort, ok := strings.Cut(server, ":")
	if !ok {
		return "", fmt.Errorf("--server %q: want host:port", server)
	}
	auth := filepath.Join(dir, "userlist.txt")
	if err := os.WriteFile(auth, []byte(strconv.Quote(User)+` ""`+"\n"), 0o644); err != nil {
		return "", err
	}
	lines := []string{
		"[databases]",
		fmt.Sprintf("%s = host=%s port=%s dbname=%s user=%s", Database, host, serverPort, Database, User),
		"[pgbouncer]",
		"listen_addr = " + listen,
		"listen_port = " + strconv.Itoa(port),
		"unix_socket_dir =",
		"auth_type = trust",
		"auth_file = " + auth,
		"admin_users = " + User,
		"pool_mode = " + pool.Mode,
		"default_pool_size = " + strconv.Itoa(pool.Size),
		"min_pool_size = 0",
		"reserve_pool_size = 0",
		"max_client_conn = 500",
		// A primary not up yet (initdb) or restarting is tried again
		// soon, not after PgBouncer's 15 s.
		"server_login_retry = 0.2",
		"server_connect_timeout = 2",
		"ignore_startup_parameters = extra_float_digits",
		"log_connections = 0",
		"log_disconnections = 0",
	}
	if pool.IdleTimeout > 0 {
		secs := strconv.FormatFloat(pool.IdleTimeout.Seconds(), 'f', -1, 64)
		lines = append(lines, "client_idle_timeout = "+secs, "server_idle_timeout = "+secs)
	}
	ini := filepath.Join(dir, "pgbouncer.ini")
	return ini, os.WriteFile(ini, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}
