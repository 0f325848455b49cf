package backends

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
)

// Unprivileged is the user a node started by root runs its server as:
// nobody, mapped onto root by a user namespace of its own, so that the
// server owns the node's files without a chown and reaches them through
// any parent directory root reaches (go test's 0700 temporary directories
// included) while the server sees a user that is not root.
const Unprivileged = 65534

// chownTree gives dir and everything in it to uid (and the group of the
// same number).
func chownTree(dir string, uid int) error {
	return filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, uid)
	})
}

// RunUnprivileged runs program as a user that is not root and waits for
// it, its output appended to logPath: a server that refuses to run as root
// (PostgreSQL, PgBouncer, MariaDB), started by a node that is lockcheck
// itself. With forward set, the signals a node is told to stop by are
// passed on to it. It dies with the node (Pdeathsig).
func RunUnprivileged(program string, args []string, logPath string, forward bool) error {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	command := func(attr *syscall.SysProcAttr) *exec.Cmd {
		cmd := exec.Command(program, args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		attr.Pdeathsig = syscall.SIGKILL
		cmd.SysProcAttr = attr
		return cmd
	}
	cmd := command(&syscall.SysProcAttr{})
	if os.Geteuid() == 0 {
		cmd = command(&syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: Unprivileged, HostID: 0, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: Unprivileged, HostID: 0, Size: 1}},
		})
	}
	err = cmd.Start()
	if errors.Is(err, syscall.EPERM) && os.Geteuid() == 0 {
		// No user namespaces here (a container's seccomp profile forbids
		// them): the server runs as nobody itself, which must then own
		// the node's directory.
		if err := chownTree(filepath.Dir(logPath), Unprivileged); err != nil {
			return err
		}
		cmd = command(&syscall.SysProcAttr{Credential: &syscall.Credential{Uid: Unprivileged, Gid: Unprivileged}})
		err = cmd.Start()
	}
	if err != nil {
		return err
	}
	if forward {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT)
		go func() {
			for s := range sigs {
				cmd.Process.Signal(s) //nolint:errcheck // it may be gone
			}
		}()
	}
	return cmd.Wait()
}
