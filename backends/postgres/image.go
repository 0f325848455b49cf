package postgres

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockcheck/lockcheck/backends"
)

// Image is the container image of PostgreSQL nodes: this lockcheck, which
// runs initdb or pg_basebackup and then the server, with Debian's
// PostgreSQL trees at their own paths, so that the --server a node is
// given names the same file inside, and the time zone data the server
// reads (Debian builds it --with-system-tzdata).
var Image = &backends.Image{
	Kind: "postgres", Tag: "lockcheck/postgres:local", Port: 5432,
	Runs:     "PostgreSQL nodes (lockcheck, which runs initdb or pg_basebackup and the postgres server)",
	Contents: "this lockcheck executable, Debian's PostgreSQL (" + home + ", " + share + ") and /usr/share/zoneinfo with the libraries they load, the shell as /bin/sh (initdb's popen runs it), and an /etc/passwd naming root, nobody and your uid (initdb looks its user up)",
	Self:     "lockcheck",
	// initdb starts the server through popen, which runs /bin/sh.
	Programs: []backends.Program{Shell},
	Links:    map[string]string{"/bin/sh": "/usr/local/bin/sh"},
	Trees: []backends.Tree{
		{Path: home, Package: "postgresql"},
		{Path: share, Package: "postgresql"},
		{Path: "/usr/share/zoneinfo", Package: "tzdata"},
	},
	Files:      map[string]string{"/etc/passwd": passwd()},
	Entrypoint: "lockcheck",
}

// Shell is the shell initdb's popen runs, as /bin/sh in the image.
var Shell = backends.Program{Name: "sh", Package: "dash"}

// home and share are the newest installed PostgreSQL's directories, or
// the pattern for them when none is, which images build then names as
// missing.
var home, share = installed()

func installed() (home, share string) {
	server, err := Server.Find(Server.Name)
	if err == nil {
		server, err = filepath.EvalSymlinks(server)
	}
	if err != nil {
		return "/usr/lib/postgresql/VERSION", "/usr/share/postgresql/VERSION"
	}
	home = filepath.Dir(filepath.Dir(server)) // .../postgresql/15/bin/postgres
	return home, filepath.Join("/usr/share/postgresql", filepath.Base(home))
}

// passwd names the users a node may run as: root, nobody (the server's
// user when root runs it) and the user building the image, whom the docker
// runtime runs containers as.
func passwd() string {
	out := "root:x:0:0:root:/:/nonexistent\n"
	out += fmt.Sprintf("nobody:x:%d:%d:nobody:/nonexistent:/nonexistent\n", backends.Unprivileged, backends.Unprivileged)
	if uid := os.Getuid(); uid != 0 && uid != backends.Unprivileged {
		out += fmt.Sprintf("lockcheck:x:%d:%d:lockcheck:/nonexistent:/nonexistent\n", uid, os.Getgid())
	}
	return out
}
