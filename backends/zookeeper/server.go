package zookeeper

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockcheck/lockcheck/backends"
)

// ServerEnv marks a process lockcheck started as a ZooKeeper server: it
// writes the server's zoo.cfg and myid from its command line and becomes
// the JVM (exec, so the server keeps the process lockcheck started, its
// process group and its parent-death signal, and a signal to the node
// reaches the JVM itself).
const ServerEnv = "LOCKCHECK_ZOOKEEPER_SERVER"

// Java is the JVM the servers run on; Debian's zookeeper package brings it
// (default-jre), and --java picks another.
var Java = backends.Program{Name: "java", Package: "zookeeper"}

// DefaultClasspath is where Debian's zookeeper package puts the server:
// zookeeper.jar names the jars it needs in its manifest; slf4j-simple (from
// libslf4j-java, which it depends on) makes it log at all, to stderr, which
// the launcher appends to LogFile.
const DefaultClasspath = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"

// MainClass is the class of a server of a replicated ensemble.
const MainClass = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

// Run params of the ZooKeeper topology.
const (
	ParamTick      = "zookeeper-tick"
	ParamClasspath = "zookeeper-classpath"
	// ParamSessionTimeout records the session timeout a client gets for the
	// run's --ttl, so that ZooKeeper's clamping shows in the results.
	ParamSessionTimeout = "zookeeper-session-timeout"
)

// DefaultTick is the servers' tickTime. ZooKeeper clamps a session timeout
// to [2, 20] ticks, so 100 ms allows sessions from 200 ms to 2 s (its own
// default of 2 s would make the shortest session 4 s).
const DefaultTick = 100 * time.Millisecond

// Limits of the ensemble, in ticks: a follower that has not heard from the
// leader for SyncTicks drops it and elects another; a follower has
// initTicks to load the leader's state when it joins.
const (
	SyncTicks = 5
	initTicks = 50
)

// Ticks are ZooKeeper's bounds of a session timeout, in ticks (its
// minSessionTimeout and maxSessionTimeout defaults, which the servers keep).
const (
	MinSessionTicks = 2
	MaxSessionTicks = 20
)

// TickFrom reads the tick from run params; a missing one is the default.
func TickFrom(params map[string]string) (time.Duration, error) {
	s := params[ParamTick]
	if s == "" {
		return DefaultTick, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 10*time.Millisecond || d%time.Millisecond != 0 {
		return DefaultTick, fmt.Errorf("--%s %q: want a whole number of milliseconds of at least 10ms, such as 100ms", ParamTick, s)
	}
	return d, nil
}

// SessionTimeout is the session timeout a server with this tick grants a
// client that asks for ttl: ttl clamped to [2, 20] ticks. ZooKeeper
// negotiates in whole milliseconds and keeps the value otherwise; it
// expires a session at the first tick after the timeout.
func SessionTimeout(ttl, tick time.Duration) time.Duration {
	return min(max(ttl.Truncate(time.Millisecond), MinSessionTicks*tick), MaxSessionTicks*tick)
}

// Config is the zoo.cfg of one server, as key=value lines in order.
func Config(self backends.Endpoint, all []backends.Endpoint, tick time.Duration) []string {
	lines := []string{
		"tickTime=" + strconv.FormatInt(tick.Milliseconds(), 10),
		"initLimit=" + strconv.Itoa(initTicks),
		"syncLimit=" + strconv.Itoa(SyncTicks),
		"dataDir=" + filepath.Join(self.Dir, DataDir),
		"clientPort=" + strconv.Itoa(self.ListenPort(0)),
		"clientPortAddress=" + self.BindAddr(),
		// Port 8080 on every server would collide, and nothing uses it.
		"admin.enableServer=false",
		"4lw.commands.whitelist=srvr,mntr,ruok,conf",
		// The transaction log is preallocated 64 MB at a time; a run writes
		// a few hundred kB and keeps every node's data as evidence.
		"preAllocSize=1024",
	}
	for i, e := range all {
		quorum, election := e.Ports[1], e.Ports[2]
		if e.Name == self.Name {
			// A server listens where its own line says; behind the
			// process runtime's proxies that is its own ports, while its
			// peers reach it at the proxies' (see QuorumCaller).
			quorum, election = self.ListenPort(1), self.ListenPort(2)
		}
		lines = append(lines, fmt.Sprintf("server.%d=%s:%d:%d", i+1, e.HostName(), quorum, election))
	}
	return lines
}

// MyID is the server's id in the ensemble: its position, from 1.
func MyID(self backends.Endpoint, all []backends.Endpoint) int {
	return slices.IndexFunc(all, func(e backends.Endpoint) bool { return e.Name == self.Name }) + 1
}

// ConfigFile is the server's configuration inside its node directory,
// DataDir its snapshots, transaction log and myid, LogFile its log.
const (
	ConfigFile = "zoo.cfg"
	DataDir    = "data"
	LogFile    = "zookeeper.log"
)

// jvmOptions keep three JVMs on a small, busy machine light and leave
// nothing behind: no hsperfdata files in /tmp (a SIGKILL would leave them),
// temporary files and crash reports in the node directory. The server logs
// to stderr, which the launcher appends to LogFile.
var jvmOptions = []string{
	"-XX:-UsePerfData",
	"-XX:+UseSerialGC",
	"-XX:TieredStopAtLevel=1",
	"-Xms16m", "-Xmx256m",
	"-XX:ErrorFile=hs_err_%p.log",
	"-Djava.io.tmpdir=.",
	"-Dorg.slf4j.simpleLogger.showDateTime=true",
	"-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSZ",
}

// ServerArgs is a server's command line for the launcher (RunServerFromEnv):
// the lines of its zoo.cfg with its myid, "--", then the JVM's command
// line, which reads zoo.cfg from the node directory it runs in.
func ServerArgs(self backends.Endpoint, all []backends.Endpoint, java, classpath string, tick time.Duration) []string {
	args := append([]string{"myid=" + strconv.Itoa(MyID(self, all))}, Config(self, all, tick)...)
	args = append(args, "--", java)
	args = append(args, jvmOptions...)
	return append(args, "-cp", classpath, MainClass, ConfigFile)
}

// RunServerFromEnv runs this process as a ZooKeeper server if ServerEnv is
// set or it was started under the name zookeeper (as in lockcheck's
// zookeeper image): it writes the configuration and becomes the JVM, its
// output appended to LogFile. It does not return if it did; a launch that
// fails ends the process with status 3.
func RunServerFromEnv() bool {
	if os.Getenv(ServerEnv) == "" && filepath.Base(os.Args[0]) != "zookeeper" {
		return false
	}
	err := runServer(os.Args[1:])
	fmt.Fprintln(os.Stderr, "lockcheck zookeeper server:", err)
	os.Exit(3)
	return true
}

// runServer configures the server and execs the JVM; it only returns on an
// error.
func runServer(args []string) error {
	argv, err := configure(args)
	if err != nil {
		return err
	}
	java, err := lookJava(argv[0])
	if err != nil {
		return err
	}
	// Appended, so that a restarted server's log follows its first life's.
	log, err := os.OpenFile(LogFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	for _, fd := range []int{1, 2} {
		if err := unix.Dup2(int(log.Fd()), fd); err != nil {
			return err
		}
	}
	return syscall.Exec(java, argv, os.Environ())
}

// configure writes zoo.cfg into the working directory and myid into the
// data directory from args (see ServerArgs) and returns the JVM's command
// line.
func configure(args []string) ([]string, error) {
	sep := slices.Index(args, "--")
	if sep < 0 || sep == len(args)-1 {
		return nil, errors.New("want zoo.cfg lines (key=value), then --, then the java command line")
	}
	var cfg strings.Builder
	myid, dataDir := "", ""
	for _, line := range args[:sep] {
		key, value, ok := strings.Cut(line, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("%q is not a zoo.cfg line key=value", line)
		}
		switch key {
		case "myid":
			myid = value
			continue
		case "dataDir":
			dataDir = value
		}
		cfg.WriteString(line + "\n")
	}
	if myid == "" || dataDir == "" {
		return nil, errors.New("myid and dataDir are required")
	}
	// A restart that wiped the data directory needs the id back.
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dataDir, "myid"), []byte(myid+"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(ConfigFile, []byte(cfg.String()), 0o644); err != nil {
		return nil, err
	}
	return args[sep+1:], nil
}

// lookJava finds the JVM, saying how to install it when it is missing.
func lookJava(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", Java.NotFound(name, err)
	}
	return path, nil
}

// Node describes one server: the lockcheck executable program, which
// becomes the server's JVM (see RunServerFromEnv), on three ports (client,
// quorum, election), keeping zoo.cfg, its data and its log in its node
// directory.
func Node(name, program, java, classpath string, tick time.Duration) backends.NodeSpec {
	return backends.NodeSpec{
		Name:    name,
		Program: program,
		Ports:   3,
		Args: func(self backends.Endpoint, all []backends.Endpoint) []string {
			return ServerArgs(self, all, java, classpath, tick)
		},
		Env:       []string{ServerEnv + "=1"},
		DataPaths: []string{DataDir},
		Ready:     answers,
		// A JVM loading ZooKeeper's jars takes seconds on a quiet machine
		// and well over the default 15 s on a starved one.
		ReadyWithin: time.Minute,
		Version:     version,
		Image:       Image,
		Command:     "zookeeper",
		Proxyable:   true,
		Caller:      QuorumCaller,
		Rewrite:     ElectionRewrite,
	}
}

// Image is the container image of the servers: this lockcheck, which
// starts a server under the name zookeeper, with the JVM and the jars of
// this machine's zookeeper package at their own paths, so that the same
// --java and --zookeeper-classpath name them inside.
var Image = &backends.Image{
	Kind: "zookeeper", Tag: "lockcheck/zookeeper:local", Port: 2181,
	Runs:     "ZooKeeper servers (zookeeper on PATH: lockcheck, which writes zoo.cfg and runs java)",
	Contents: "this lockcheck executable under the name zookeeper, and the JVM (" + jvmHome + ") and jars (/usr/share/java) of Debian's zookeeper package, with the libraries they load",
	Self:     "lockcheck",
	Trees: []backends.Tree{
		{Path: jvmHome + "/bin", Package: "zookeeper"},
		{Path: jvmHome + "/lib", Package: "zookeeper"},
		{Path: jvmHome + "/conf", Package: "zookeeper"},
		{Path: "/usr/share/java", Package: "zookeeper"},
	},
	Links:      map[string]string{"zookeeper": "lockcheck", "java": jvmHome + "/bin/java"},
	Entrypoint: "zookeeper",
}

// jvmHome is Debian's default JVM, which the zookeeper package depends on.
const jvmHome = "/usr/lib/jvm/default-java"
