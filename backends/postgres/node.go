// Package postgres is PostgreSQL as a lockcheck node and as a lock backend:
// session-level advisory locks (pg_try_advisory_lock on a session the
// client keeps open for the hold, released by pg_advisory_unlock) and
// transaction-level ones (pg_try_advisory_xact_lock inside a transaction
// that the release commits). Such a lock has no TTL: it lives exactly as
// long as its session or transaction, which a terminated backend ends at
// once while its client learns only at its next statement.
//
// A node is lockcheck itself started with NodeEnv set: it runs initdb into
// the node's directory on its first start and then the postgres server as
// its child, as an unprivileged user, since PostgreSQL refuses to run as
// root (see RunNodeFromEnv). A run may put PgBouncer in front of the
// primary (--pooler pgbouncer, pooler.go), started the same way, through
// which the clients take their locks as an application behind a pooler
// does.
package postgres

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockcheck/lockcheck/backends"
)

// Server is the postgres executable; initdb and pg_basebackup are looked
// up beside it.
// Debian installs both under /usr/lib/postgresql/<version>/bin, off PATH.
var Server = backends.Program{Name: "postgres", Package: "postgresql", Search: "/usr/lib/postgresql/*/bin/postgres"}

// NodeEnv marks a process lockcheck started as a PostgreSQL node.
const NodeEnv = "LOCKCHECK_POSTGRES_NODE"

// Primary is the name of the node that serves clients (and the resource,
// when no replica fails over) at the start of a run; Standby the name of
// its streaming replica, when the run has one (--replicas 1).
const (
	Primary = "pg-0"
	Standby = "pg-1"
)

// ResourceNode names the PostgreSQL instance that keeps --resource postgres
// on its own when the backend's cluster has a replica: a failover must not
// take the ground truth with it.
const ResourceNode = "pg-resource"

// User is the database superuser every node creates and every client
// connects as; Database the database they use.
const (
	User     = "lockcheck"
	Database = "postgres"
)

// dataDir is the cluster's directory inside the node's directory.
const dataDir = "data"

// LogFile is the server's log inside the node's directory.
const LogFile = "postgres.log"

// Node describes one PostgreSQL node: program is the lockcheck executable,
// which becomes the node when started with NodeEnv set, and server the
// postgres executable it runs.
func Node(name, program, server string) backends.NodeSpec {
	// initdb and pg_basebackup are beside the real server, where Debian
	// installs them all (a server found through a symbolic link on PATH
	// leads there too), and that path is the same inside the image.
	if real, err := filepath.EvalSymlinks(server); err == nil {
		server = real
	}
	return backends.NodeSpec{
		Name:    name,
		Program: program,
		Ports:   1,
		Args: func(self backends.Endpoint, all []backends.Endpoint) []string {
			args := []string{
				"--server", server,
				"--dir", self.Dir,
				"--name", self.Name,
				"--listen", self.BindAddr(),
				"--port", strconv.Itoa(self.ListenPort(0)),
			}
			for _, e := range all {
				if e.Name != self.Name {
					args = append(args, "--peer", e.Addr())
				}
			}
			return args
		},
		Env:       []string{NodeEnv + "=1"},
		DataPaths: []string{dataDir},
		// A wiped standby copies its primary again; a wiped primary waits
		// for one, and PostgreSQL promotes no standby by itself.
		WipedCopiesPeer: true,
		Ready:           ready,
		Image:           Image,
		Command:         "lockcheck",
		// initdb took 7-14 s on a busy 2-core machine, before the server
		// starts; a standby waits for its primary's initdb, then copies it.
		ReadyWithin: 2 * time.Minute,
		Version:     version,
		Proxyable:   true,
		Caller:      StartupCaller,
	}
}

// ConnConfig is the client configuration of the node at addr.
func ConnConfig(addr string, timeout time.Duration) (*pgx.ConnConfig, error) {
	return connConfig([]string{addr}, timeout, "", "")
}

// connConfig is the configuration of a client that tries addrs in order,
// taking the first whose server offers attrs (target_session_attrs; ""
// takes any), and connects from source (none: wherever the system picks).
func connConfig(addrs []string, timeout time.Duration, attrs, source string) (*pgx.ConnConfig, error) {
	u := url.URL{Scheme: "postgres", User: url.User(User), Host: strings.Join(addrs, ","), Path: "/" + Database}
	q := url.Values{}
	q.Set("sslmode", "disable")
	q.Set("connect_timeout", strconv.Itoa(max(1, int(timeout.Seconds()))))
	if attrs != "" {
		q.Set("target_session_attrs", attrs)
	}
	u.RawQuery = q.Encode()
	cfg, err := pgx.ParseConfig(u.String())
	if err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = timeout
	if source != "" {
		cfg.DialFunc = backends.Dialer(source, timeout)
	}
	return cfg, nil
}

// Connect opens a session on the node at addr.
func Connect(ctx context.Context, addr string, timeout time.Duration) (*pgx.Conn, error) {
	cfg, err := ConnConfig(addr, timeout)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// ConnectPrimary opens a session on the first of addrs that accepts
// writes (target_session_attrs=read-write): the primary, wherever a
// failover moved it. A standby, or a node that is down, is skipped. The
// session's connection comes from source, if set.
func ConnectPrimary(ctx context.Context, addrs []string, timeout time.Duration, source string) (*pgx.Conn, error) {
	cfg, err := connConfig(addrs, timeout, "read-write", source)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// ready returns nil once the node accepts a connection and answers.
func ready(ctx context.Context, addr string) error {
	conn, err := Connect(ctx, addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

func version(ctx context.Context, addr string) (string, error) {
	conn, err := Connect(ctx, addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var v string
	err = conn.QueryRow(ctx, "SHOW server_version").Scan(&v)
	return "postgres " + v, err
}

// RunNodeFromEnv runs this process as a PostgreSQL node if NodeEnv says so,
// or as a PgBouncer node if PoolerNodeEnv does, and reports whether it did;
// it does not return if it did.
func RunNodeFromEnv() bool {
	run, what := runNode, "postgres node:"
	switch {
	case os.Getenv(PoolerNodeEnv) != "":
		run, what = runPooler, "pgbouncer node:"
	case os.Getenv(NodeEnv) == "":
		return false
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, what, err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

// runNode initialises the cluster on the first start and runs the server
// until it exits. The server stays in this process's group, so a signal
// the harness sends the node's group reaches it (its backends each lead a
// session of their own: the harness signals the node's descendants too).
func runNode(args []string) error {
	fl := flag.NewFlagSet("postgres-node", flag.ContinueOnError)
	server := fl.String("server", "postgres", "postgres executable")
	dir := fl.String("dir", ".", "node directory")
	name := fl.String("name", Primary, "node name (cluster_name)")
	listen := fl.String("listen", backends.Loopback, "address to listen on")
	port := fl.Int("port", 5432, "port")
	var peers addrList
	fl.Var(&peers, "peer", "address of another node of the cluster (repeatable)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	data := filepath.Join(*dir, dataDir)
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := os.RemoveAll(data); err != nil {
			return err
		}
		if err := createCluster(*server, data, *dir, *name, *listen, peers); err != nil {
			return err
		}
	}
	args, sockets := serverArgs(data, *dir, *name, *listen, *port)
	locks := []string{filepath.Join(data, "postmaster.pid")}
	if sockets != "" {
		locks = append(locks, filepath.Join(sockets, fmt.Sprintf(".s.PGSQL.%d.lock", *port)))
	}
	for _, lock := range locks {
		if err := clearStaleLock(lock); err != nil {
			return err
		}
	}
	return backends.RunUnprivileged(*server, args, filepath.Join(*dir, LogFile), true)
}

// addrList is a repeatable flag.
type addrList []string

func (a *addrList) String() string     { return strings.Join(*a, ",") }
func (a *addrList) Set(v string) error { *a = append(*a, v); return nil }

// createCluster makes a node's empty data directory a cluster. A node whose
// peers have a primary copies it and becomes its streaming standby
// (pg_basebackup -R: standby.signal and primary_conninfo); that is how a
// replica starts, and how an old primary rejoins after a failover, wiped.
// Otherwise a node alone, or the first node (pg-0) when no peer answers at
// all, runs initdb; any other waits for a primary to copy: a standby never
// starts a cluster of its own.
func createCluster(server, data, dir, name, listen string, peers []string) error {
	bin := filepath.Dir(server)
	for {
		primary, anyAnswered := findPrimary(peers)
		switch {
		case primary != "":
			host, port, err := net.SplitHostPort(primary)
			if err != nil {
				return err
			}
			// --checkpoint=fast: otherwise the copy waits for the
			// primary's next checkpoint, minutes away; --no-sync as for
			// initdb below. -R writes the connection's settings into
			// primary_conninfo: with no TLS or GSSAPI request first, a
			// replication connection opens with its startup packet, whose
			// application_name (the node's name, as for the walreceiver,
			// cluster_name) tells the process runtime's proxies who calls
			// (StartupCaller).
			err = backends.RunUnprivileged(filepath.Join(bin, "pg_basebackup"), []string{"-h", host, "-p", port, "-U", User, "-D", data,
				"-d", "sslmode=disable gssencmode=disable application_name=" + name,
				"-R", "-X", "stream", "--checkpoint=fast", "--no-sync"}, filepath.Join(dir, "basebackup.log"), false)
			if err != nil {
				return fmt.Errorf("pg_basebackup from %s: %w (see %s)", primary, err, filepath.Join(dir, "basebackup.log"))
			}
			return nil
		case !anyAnswered && (name == Primary || len(peers) == 0):
			// --no-sync: a crash of this machine during a test may lose
			// the fresh cluster; the server itself runs with fsync on.
			err := backends.RunUnprivileged(filepath.Join(bin, "initdb"), []string{"-D", data, "-U", User, "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"}, filepath.Join(dir, "initdb.log"), false)
			if err != nil {
				return fmt.Errorf("initdb: %w (see %s)", err, filepath.Join(dir, "initdb.log"))
			}
			return trustNetwork(data, listen)
		}
		time.Sleep(200 * time.Millisecond) // the harness gives up on a node not ready in time
	}
}

// trustNetwork lets clients and standbys on the node's own network in
// when it listens beyond loopback (a container on the run's private
// network): initdb's pg_hba.conf trusts loopback only.
func trustNetwork(data, listen string) error {
	if ip := net.ParseIP(listen); ip != nil && ip.IsLoopback() {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("host all all samenet trust\nhost replication all samenet trust\n")
	return errors.Join(err, f.Close())
}

// findPrimary is the first of peers that answers and accepts writes, and
// whether any peer answered at all.
func findPrimary(peers []string) (primary string, anyAnswered bool) {
	for _, p := range peers {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := Connect(ctx, p, time.Second)
		if err != nil {
			cancel()
			continue
		}
		anyAnswered = true
		var standby bool
		err = conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&standby)
		conn.Close(context.Background()) //nolint:errcheck // read what was needed
		cancel()
		if err == nil && !standby {
			return p, true
		}
	}
	return "", anyAnswered
}

// clearStaleLock removes a lock file a killed server left (postmaster.pid,
// its socket's .lock) when the process it names is dead but not yet
// reaped: its parent, the node process, was killed with it, and until init
// reaps the zombie the server would take it for a postmaster still running
// and refuse to start.
func clearStaleLock(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil // none: a clean start
	}
	first, _, _ := strings.Cut(string(raw), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return nil // the server judges a file it cannot read itself
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := strings.LastIndexByte(string(stat), ')'); err != nil || (i > 0 && i+2 < len(stat) && stat[i+2] == 'Z') {
			return os.Remove(path)
		}
		if time.Now().After(deadline) {
			return nil // a live server: let it say so
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serverArgs is the server's command line and its socket directory: the
// node's directory unless its path is too long for a socket (108 bytes),
// else none; clients use TCP on loopback either way.
func serverArgs(data, dir, name, listen string, port int) (args []string, sockets string) {
	sockets = dir
	if len(dir)+len("/.s.PGSQL.65535.lock") >= 108 {
		sockets = ""
	}
	return []string{
		"-D", data,
		"-c", "listen_addresses=" + listen,
		"-p", strconv.Itoa(port),
		"-c", "unix_socket_directories=" + sockets,
		"-c", "cluster_name=" + name,
		"-c", "fsync=on",
		"-c", "synchronous_commit=on",
		"-c", "shared_buffers=16MB",
		"-c", "max_connections=200",
		"-c", "logging_collector=off",
		"-c", "log_min_messages=warning",
		// A standby whose primary died retries its WAL source every 5 s
		// by default, and a promotion waits for that sleep to end.
		"-c", "wal_retrieve_retry_interval=100ms",
	}, sockets
}
