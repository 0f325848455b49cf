// Package mariadb is MariaDB as a lockcheck node and as a lock backend:
// GET_LOCK(name, 0) on a session the client keeps open for the hold,
// RELEASE_LOCK to release it, IS_USED_LOCK to see who holds it. Such a lock
// hands out no fence, and it is freed "implicitly when your session
// terminates (either normally or abnormally)": by a KILL CONNECTION, by the
// death of the client or of the server, and by the server closing a
// session idle for wait_timeout, which the client sets and which is the
// lease. A client learns that its session is gone only at its next
// statement.
//
// A node is lockcheck itself started with NodeEnv set: it runs
// mariadb-install-db into the node's directory on its first start and then
// mariadbd as its child, as an unprivileged user when root starts it, with
// its datadir, socket, temporary files and log in the node's directory.
package mariadb

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockcheck/lockcheck/backends"
)

// Server is the mariadbd executable; Debian installs it in /usr/sbin, and
// mariadb-install-db, which the node runs first, in /usr/bin.
var Server = backends.Program{Name: "mariadbd", Package: "mariadb-server", Search: "/usr/sbin/mariadbd"}

// installDB makes a datadir's system tables.
var installDB = backends.Program{Name: "mariadb-install-db", Package: "mariadb-server"}

// NodeEnv marks a process lockcheck started as a MariaDB node.
const NodeEnv = "LOCKCHECK_MARIADB_NODE"

// NodeName is the one server's node.
const NodeName = "mariadb-0"

// User is the account every client connects as; the node creates it, with
// every privilege and no password (a client on loopback is trusted, as
// the PostgreSQL nodes trust theirs).
const User = "lockcheck"

// dataDir is the datadir inside the node's directory; LogFile the
// server's error log.
const (
	dataDir = "data"
	LogFile = "mariadb.log"
)

// Node describes the MariaDB node: program is the lockcheck executable,
// which becomes the node when started with NodeEnv set, and server the
// mariadbd executable it runs.
func Node(name, program, server string) backends.NodeSpec {
	return backends.NodeSpec{
		Name:    name,
		Program: program,
		Ports:   1,
		Args: func(self backends.Endpoint, _ []backends.Endpoint) []string {
			return []string{
				"--mariadbd", server,
				"--dir", self.Dir,
				"--name", self.Name,
				"--listen", self.BindAddr(),
				"--port", strconv.Itoa(self.ListenPort(0)),
			}
		},
		Env:       []string{NodeEnv + "=1"},
		DataPaths: []string{dataDir},
		Ready:     ready,
		// mariadb-install-db runs first, which a busy machine makes slow.
		ReadyWithin: 2 * time.Minute,
		Version:     version,
		Proxyable:   true,
	}
}

func ready(ctx context.Context, addr string) error {
	db, err := open(addr, time.Second, "")
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

func version(ctx context.Context, addr string) (string, error) {
	db, err := open(addr, time.Second, "")
	if err != nil {
		return "", err
	}
	defer db.Close()
	var v string
	err = db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&v)
	return "mariadb " + v, err
}

// RunNodeFromEnv runs this process as a MariaDB node if NodeEnv says so,
// and reports whether it did; it does not return if it did.
func RunNodeFromEnv() bool {
	if os.Getenv(NodeEnv) == "" {
		return false
	}
	if err := runNode(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mariadb node:", err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

// runNode makes the datadir on the first start and runs the server until
// it exits.
func runNode(args []string) error {
	fl := flag.NewFlagSet("mariadb-node", flag.ContinueOnError)
	server := fl.String("mariadbd", Server.Name, "mariadbd executable")
	dir := fl.String("dir", ".", "node directory")
	name := fl.String("name", NodeName, "node name (report_host)")
	listen := fl.String("listen", backends.Loopback, "address to listen on")
	port := fl.Int("port", 3306, "port")
	if err := fl.Parse(args); err != nil {
		return err
	}
	data := filepath.Join(*dir, dataDir)
	if _, err := os.Stat(filepath.Join(data, "mysql")); errors.Is(err, os.ErrNotExist) {
		if err := os.RemoveAll(data); err != nil {
			return err
		}
		if err := install(*server, data, *dir); err != nil {
			return err
		}
	}
	init := filepath.Join(*dir, "init.sql")
	// One statement a line: the server runs the file at every start.
	grant := fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%';\nGRANT ALL ON *.* TO '%s'@'%%';\n", User, User)
	if err := os.WriteFile(init, []byte(grant), 0o644); err != nil {
		return err
	}
	tmp := filepath.Join(*dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	return backends.RunUnprivileged(*server, []string{
		"--no-defaults", // not the package's /etc/mysql
		"--datadir=" + data,
		"--bind-address=" + *listen,
		"--port=" + strconv.Itoa(*port),
		// Relative to the datadir, where the server runs: a short path
		// for a socket, and nothing left outside the node's directory.
		"--socket=mariadbd.sock",
		"--pid-file=" + filepath.Join(*dir, "mariadbd.pid"),
		"--log-error=" + filepath.Join(*dir, LogFile),
		"--tmpdir=" + tmp,
		"--init-file=" + init,
		"--report-host=" + *name,
		"--skip-name-resolve",
		"--innodb-buffer-pool-size=16M",
		"--max-connections=300",
	}, filepath.Join(*dir, LogFile), true)
}

// install runs mariadb-install-db, found beside server or on PATH, into
// data.
func install(server, data, dir string) error {
	program := filepath.Join(filepath.Dir(filepath.Dir(server)), "bin", installDB.Name)
	if _, err := os.Stat(program); err != nil {
		if program, err = exec.LookPath(installDB.Name); err != nil {
			return installDB.NotFound(installDB.Name, err)
		}
	}
	log := filepath.Join(dir, "install.log")
	err := backends.RunUnprivileged(program, []string{"--no-defaults", "--datadir=" + data,
		"--auth-root-authentication-method=normal", "--skip-test-db"}, log, false)
	if err != nil {
		return fmt.Errorf("mariadb-install-db: %w (see %s)", err, log)
	}
	return nil
}

// Service is the nemesis's handle on the MariaDB node of a run: it kills a
// client's session the way an operator, a proxy or wait_timeout does
// (nemesis.SessionKiller).
type Service struct {
	nodes map[string]string // node name -> client address
}

// NewService is the handle on the nodes eps.
func NewService(eps []backends.Endpoint) *Service {
	return &Service{nodes: backends.AddrsByName(eps)}
}

// TerminateSession ends the session named session (node/connection id, as
// a grant names it) with KILL CONNECTION, and reports whether the server
// found that connection to kill.
func (s *Service) TerminateSession(ctx context.Context, session string) (bool, error) {
	addr, id, err := backends.SessionOn(s.nodes, session)
	if err != nil {
		return false, fmt.Errorf("mariadb: %w", err)
	}
	db, err := open(addr, 2*time.Second, "")
	if err != nil {
		return false, err
	}
	defer db.Close()
	return kill(ctx, db, id)
}

// kill ends connection id, and reports whether the server found it.
func kill(ctx context.Context, db *sql.DB, id int64) (bool, error) {
	_, err := db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == errUnknownThread {
		return false, nil
	}
	return err == nil, err
}

// errUnknownThread is ER_NO_SUCH_THREAD: no connection has that id.
const errUnknownThread = 1094
