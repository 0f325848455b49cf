package spawn

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockcheck/lockcheck/internal/procstate"
)

// A program lockcheck did not write may fork, setsid and double-fork: a
// process group, the parent-death signal (which reaches children, not
// grandchildren) and a walk of the tree at kill time all miss some of
// what it leaves. So a caged program runs under a keeper: the executable
// that links this package (lockcheck, or a test binary) started again
// with cageEnv set, which takes over in init before main. The keeper is a
// child subreaper, so every orphan of the program, in whatever session,
// becomes its child; it kills all of them when the program exits, when it
// is told to (SIGTERM) and when its parent dies (its parent-death signal
// is SIGTERM, which it can catch, where the others' is SIGKILL).
const cageEnv = "LOCKCHECK_SPAWN_CAGE"

// cageArg0 is the keeper's name in ps and pgrep.
const cageArg0 = "lockcheck-cage"

// sweepFor bounds the keeper's last sweep: a process stuck in the kernel
// (state D) does not die of SIGKILL until it leaves it, and the keeper
// must end anyway.
const sweepFor = 10 * time.Second

func init() {
	if os.Getenv(cageEnv) == "1" {
		os.Exit(keep())
	}
}

// StartCaged starts cmd like Start, in this process's group (so a stop or
// kill of the group reaches it), under a keeper that ends every process
// the program starts, with the program and with this process, SIGKILL of
// this process included. cmd.Process is the keeper's: its exit status is
// the program's, and KillCaged ends the whole cage. cmd.ExtraFiles must be
// empty: the keeper passes on stdin, stdout and stderr only.
func StartCaged(cmd *exec.Cmd) error {
	if cmd.Err != nil {
		return cmd.Err
	}
	if len(cmd.ExtraFiles) > 0 {
		return errors.New("spawn: a caged command takes no extra files")
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("spawn: finding the executable to keep %s: %w", cmd.Path, err)
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	// The keeper tells how the program's start went on a pipe of its own
	// (fd 3): an error that exec would have returned, or EOF once it runs.
	status, statusW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer status.Close()
	cmd.Args = append([]string{cageArg0, cmd.Path}, cmd.Args...)
	cmd.Path = self
	cmd.Env = append(env[:len(env):len(env)], cageEnv+"=1")
	cmd.ExtraFiles = []*os.File{statusW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	done := make(chan error, 1)
	requests <- request{cmd, done}
	err = <-done
	statusW.Close()
	if err != nil {
		return err
	}
	msg, _ := io.ReadAll(status)
	if len(msg) > 0 {
		cmd.Wait() //nolint:errcheck // the keeper exits at once; its status says nothing more
		return errors.New(string(msg))
	}
	return nil
}

// KillCaged ends the cage of a command started by StartCaged, whose keeper
// is pid: SIGKILL to every process in it now, so none runs on, then
// SIGTERM to the keeper (continued first, if it was stopped), which sweeps
// up whatever they forked meanwhile and exits.
func KillCaged(pid int) {
	for _, d := range procstate.Descendants(pid) {
		syscall.Kill(d, syscall.SIGKILL) //nolint:errcheck // it may have exited meanwhile
	}
	syscall.Kill(pid, syscall.SIGCONT) //nolint:errcheck // it may have exited meanwhile
	syscall.Kill(pid, syscall.SIGTERM) //nolint:errcheck // it may have exited meanwhile
}

// keep is the keeper: os.Args is cageArg0, the program's path, then its
// argv. It returns the exit code to mirror the program's.
func keep() int {
	// The program's parent-death signal fires when the thread that forked
	// it exits: this one, the main thread, exits only with the process.
	runtime.LockOSThread()
	// The status pipe came without close-on-exec, as extra files do: the
	// program must not hold it, or its starter would wait on it for good.
	syscall.CloseOnExec(3)
	report := os.NewFile(3, "status")
	fail := func(err error) int {
		fmt.Fprintf(report, "%v", err)
		return 127
	}
	if len(os.Args) < 3 {
		return fail(errors.New("spawn: the keeper was started without a program"))
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("spawn: becoming the subreaper of %s: %w", os.Args[1], err))
	}
	// Caught before the program starts, so a death of the parent meanwhile
	// is not lost. SIGINT is caught to be ignored: Ctrl-C reaches the
	// whole foreground group, and whoever started the program decides
	// what it means; a caught signal, unlike an ignored one, is reset for
	// the program by exec.
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, cageEnv+"=") {
			env = append(env, kv)
		}
	}
	prog, err := os.StartProcess(os.Args[1], os.Args[2:], &os.ProcAttr{
		Env:   env,
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return fail(err)
	}
	report.Close()
	// The keeper holds no end of the program's pipes: its stdout and stderr
	// end when the program and what it started are gone, not the keeper.
	if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		for fd := 0; fd <= 2; fd++ {
			unix.Dup2(int(null.Fd()), fd) //nolint:errcheck // a keeper writes nothing anyway
		}
		null.Close()
	}
	go func() {
		for sig := range signals {
			if sig != syscall.SIGINT {
				prog.Signal(syscall.SIGKILL) //nolint:errcheck // gone already is fine
			}
		}
	}()
	// Reap every child until the program exits: orphans of its tree are
	// this process's children now.
	var ws syscall.WaitStatus
	for {
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid == prog.Pid {
			break
		}
	}
	sweep()
	return mirror(ws)
}

// sweep kills every descendant of the keeper and reaps it, again and again
// until none is left: a process can fork between a listing and its kill,
// and its child is then the keeper's to find on the next pass.
func sweep() {
	self := os.Getpid()
	deadline := time.Now().Add(sweepFor)
	for time.Now().Before(deadline) {
		left := procstate.Descendants(self)
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck // it may have exited meanwhile
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil || pid <= 0 {
				break
			}
		}
		if len(left) == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mirror ends the keeper as the program ended: with its exit code, or by
// its signal, so that the keeper's status, all its starter sees, is the
// program's.
func mirror(ws syscall.WaitStatus) int {
	if !ws.Signaled() {
		return ws.ExitStatus()
	}
	sig := ws.Signal()
	signal.Reset(sig)
	syscall.Kill(os.Getpid(), sig) //nolint:errcheck // to ourselves
	// A signal the runtime keeps for itself (SIGSEGV) or one that does not
	// end a process: the shell's convention.
	time.Sleep(100 * time.Millisecond)
	return 128 + int(sig)
}
