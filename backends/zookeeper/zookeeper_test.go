package zookeeper

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
)

// The live tests of this backend (a real ensemble, its faults, whole runs)
// are in harness/zookeeper_test.go and cmd/lockcheck/e2e_zookeeper_test.go:
// they need the harness to start the servers.

func TestSessionTimeoutIsClampedToTwoToTwentyTicks(t *testing.T) {
	tests := []struct {
		ttl, tick, want time.Duration
	}{
		{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond},
		{500 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond},
		{1234567 * time.Microsecond, 100 * time.Millisecond, 1234 * time.Millisecond},
		{5 * time.Second, 100 * time.Millisecond, 2 * time.Second},
		{500 * time.Millisecond, 2 * time.Second, 4 * time.Second},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, SessionTimeout(tt.ttl, tt.tick), "ttl %s, tick %s", tt.ttl, tt.tick)
	}
}

func TestTickFromParams(t *testing.T) {
	tests := []struct {
		value   string
		want    time.Duration
		wantErr bool
	}{
		{"", DefaultTick, false},
		{"200ms", 200 * time.Millisecond, false},
		{"5ms", DefaultTick, true},
		{"1500us", DefaultTick, true},
		{"fast", DefaultTick, true},
	}
	for _, tt := range tests {
		got, err := TickFrom(map[string]string{ParamTick: tt.value})
		assert.Equal(t, tt.want, got, tt.value)
		if tt.wantErr {
			require.Error(t, err, tt.value)
			assert.Contains(t, err.Error(), "--"+ParamTick)
		} else {
			assert.NoError(t, err, tt.value)
		}
	}
}

// A server's command line is its zoo.cfg, its myid and the JVM's command
// line; the servers listen where the runtime says and know each other by
// the address others reach them at.
func TestServerArgsNameEveryServer(t *testing.T) {
	all := []backends.Endpoint{
		{Name: "zk-1", Ports: []int{2000, 2001, 2002}, Dir: "/run/zk-1"},
		{Name: "zk-2", Host: "172.28.0.3", Bind: "0.0.0.0", Ports: []int{2181, 2182, 2183}, Dir: "/run/zk-2"},
	}
	spec := Node("zk-2", "/bin/lockcheck", "java", DefaultClasspath, DefaultTick)
	assert.Equal(t, 3, spec.Ports)
	assert.Equal(t, []string{ServerEnv + "=1"}, spec.Env)
	assert.Equal(t, []string{DataDir}, spec.DataPaths)
	args := spec.Args(all[1], all)
	sep := 0
	for i, a := range args {
		if a == "--" {
			sep = i
		}
	}
	assert.Equal(t, []string{
		"myid=2",
		"tickTime=100",
		"initLimit=50",
		"syncLimit=5",
		"dataDir=/run/zk-2/data",
		"clientPort=2181",
		"clientPortAddress=0.0.0.0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=srvr,mntr,ruok,conf",
		"preAllocSize=1024",
		"server.1=127.0.0.1:2001:2002",
		"server.2=172.28.0.3:2182:2183",
	}, args[:sep])
	java := args[sep+1:]
	assert.Equal(t, "java", java[0])
	assert.Equal(t, []string{"-cp", DefaultClasspath, MainClass, ConfigFile}, java[len(java)-4:])
	assert.Contains(t, java, "-XX:-UsePerfData", "a killed JVM leaves no hsperfdata file in /tmp")
}

// Behind the process runtime's proxies a server listens on its own ports,
// which only its own line names; its peers' lines name the proxies'.
func TestConfigBehindProxiesListensOnItsOwnPorts(t *testing.T) {
	all := []backends.Endpoint{
		{Name: "zk-1", Ports: []int{2000, 2001, 2002}, Listen: []int{3000, 3001, 3002}, Dir: "/run/zk-1"},
		{Name: "zk-2", Ports: []int{2181, 2182, 2183}, Listen: []int{3181, 3182, 3183}, Dir: "/run/zk-2"},
	}
	lines := Config(all[0], all, DefaultTick)
	assert.Contains(t, lines, "clientPort=3000")
	assert.Contains(t, lines, "server.1=127.0.0.1:3001:3002")
	assert.Contains(t, lines, "server.2=127.0.0.1:2182:2183")
}

// The launcher writes zoo.cfg where it runs and myid into the data
// directory (again after a wipe), and hands on the JVM's command line.
func TestConfigureWritesTheServersFiles(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	data := filepath.Join(dir, "data")
	argv, err := configure([]string{"myid=3", "tickTime=100", "dataDir=" + data, "--", "java", "-cp", "x.jar", MainClass, ConfigFile})
	require.NoError(t, err)
	assert.Equal(t, []string{"java", "-cp", "x.jar", MainClass, ConfigFile}, argv)
	cfg, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	require.NoError(t, err)
	assert.Equal(t, "tickTime=100\ndataDir="+data+"\n", string(cfg))
	myid, err := os.ReadFile(filepath.Join(data, "myid"))
	require.NoError(t, err)
	assert.Equal(t, "3\n", string(myid))
}

func TestConfigureRefusesABadCommandLine(t *testing.T) {
	t.Chdir(t.TempDir())
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no java", []string{"myid=1", "dataDir=/tmp/x"}, "then --, then the java command line"},
		{"nothing after --", []string{"myid=1", "dataDir=/tmp/x", "--"}, "then --, then the java command line"},
		{"not key=value", []string{"myid=1", "dataDir", "--", "java"}, `"dataDir" is not a zoo.cfg line`},
		{"no myid", []string{"dataDir=/tmp/x", "--", "java"}, "myid and dataDir are required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := configure(tt.args)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestMissingJavaSaysHowToInstallIt(t *testing.T) {
	_, err := lookJava("/nonexistent/java")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "apt-get install zookeeper")
	assert.Contains(t, err.Error(), "--java")
}

// srvr answers as Debian's ZooKeeper 3.8 does (zk.FLWSrvr expects another
// build-date format and refuses it).
func TestParseSrvr(t *testing.T) {
	leader := "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\n" +
		"Latency min/avg/max: 0/0.0/0\nReceived: 1\nSent: 0\nConnections: 1\nOutstanding: 0\n" +
		"Zxid: 0x300000012\nMode: leader\nNode count: 5\nProposal sizes last/min/max: -1/-1/-1\n"
	st, err := parseSrvr(leader)
	require.NoError(t, err)
	assert.Equal(t, Status{Version: "3.8.0", Mode: "leader", Zxid: 0x300000012}, st)
	assert.EqualValues(t, 3, st.Epoch())

	st, err = parseSrvr(notServing + "\n")
	require.NoError(t, err)
	assert.Empty(t, st.Mode, "a server without a quorum serves nothing")

	_, err = parseSrvr("HTTP/1.1 400 Bad Request\n")
	assert.Error(t, err)
}

func TestReadinessWantsOneLeaderAndItsFollowers(t *testing.T) {
	leader := serverStatus{name: "zk-1", st: Status{Version: "3.8.0", Mode: "leader"}}
	follower := func(name string) serverStatus {
		return serverStatus{name: name, st: Status{Version: "3.8.0", Mode: "follower"}}
	}
	tests := []struct {
		name    string
		answers []serverStatus
		want    string
	}{
		{"ready", []serverStatus{leader, follower("zk-2"), follower("zk-3")}, ""},
		{"no answer", []serverStatus{leader, {name: "zk-2", err: os.ErrDeadlineExceeded}, follower("zk-3")}, "zk-2 does not answer"},
		{"electing", []serverStatus{leader, {name: "zk-2", st: Status{Version: "3.8.0"}}, follower("zk-3")}, "zk-2 serves no requests yet"},
		{"no leader", []serverStatus{follower("zk-1"), follower("zk-2")}, "0 servers say they lead"},
		{"standalone", []serverStatus{{name: "zk-1", st: Status{Version: "3.8.0", Mode: "standalone"}}}, "not a member of the ensemble"},
	}
	for _, tt := range tests {
		got := readiness(tt.answers)
		if tt.want == "" {
			assert.Empty(t, got, tt.name)
		} else {
			assert.Contains(t, got, tt.want, tt.name)
		}
	}
}

func TestLowestChildHoldsTheLock(t *testing.T) {
	children := []string{"lock-0000000012", "_c_0f3a-lock-0000000010", "lock-0000000011"}
	assert.True(t, lowest(children, "/lockcheck/lock-0/_c_0f3a-lock-0000000010"))
	assert.False(t, lowest(children, "/lockcheck/lock-0/lock-0000000011"))
	assert.False(t, lowest([]string{"lock-0000000011"}, "/lockcheck/lock-0/lock-0000000010"), "a node that is gone holds nothing")
}

// The servers' answers to a request are certain failures; a lost
// connection, an expired session or a timeout leave the outcome unknown.
func TestOnlyTheServersAnswersAreCertainFailures(t *testing.T) {
	for _, err := range []error{zk.ErrNoNode, zk.ErrNodeExists, zk.ErrBadVersion} {
		assert.True(t, answered(err), err.Error())
		assert.ErrorIs(t, refusal{err}, backends.ErrNotAcquired)
	}
	for _, err := range []error{zk.ErrConnectionClosed, zk.ErrSessionExpired, zk.ErrClosing, zk.ErrNoServer, os.ErrDeadlineExceeded} {
		assert.False(t, answered(err), err.Error())
	}
}

// A release after a disconnection gives the session up, and closing it may
// delete the lock node at any moment: its outcome is unknown (an info in
// the history), never "deleted nothing", which would keep the lease live
// in the history and make the next grant look like a violation. No server
// is needed: the session is never connected.
func TestReleaseAfterADisconnectionHasAnUnknownOutcome(t *testing.T) {
	s := &session{lost: make(chan struct{}), ready: make(chan struct{})}
	conn, _, err := zk.Connect([]string{"127.0.0.1:1"}, time.Second, zk.WithLogger(s))
	require.NoError(t, err)
	s.conn = conn
	close(s.lost)
	l := &Lock{opts: Options{Client: backends.Client{Timeout: time.Second}}, s: s, dirs: map[string]bool{}}

	deleted, err := l.Release(context.Background(), "lock-0", backends.Grant{Token: "/lockcheck/lock-0/lock-0000000001", Lost: s.lost})
	assert.False(t, deleted)
	require.ErrorIs(t, err, errGivenUp)
	assert.NotErrorIs(t, err, backends.ErrNotAcquired, "the close may delete the node: no certain failure")
	assert.Nil(t, l.s, "the session is given up")
}
