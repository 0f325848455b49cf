package etcd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/storage/wal"

	"github.com/lockcheck/lockcheck/backends"
)

// MemberEnv marks a process lockcheck started as an etcd member: lockcheck
// re-executes itself, so no etcd binary is needed.
const MemberEnv = "LOCKCHECK_ETCD_MEMBER"

// memberCommand is the first argument of a member process, so that ps shows
// what it is.
const memberCommand = "etcd-member"

// Run params of the etcd topology, as Go durations.
const (
	ParamHeartbeat = "etcd-heartbeat"
	ParamElection  = "etcd-election"
	// ParamSessionTTL records the lease a session gets for the run's --ttl,
	// so that the rounding to whole seconds shows in the results.
	ParamSessionTTL = "etcd-session-ttl"
)

// Timing is the members' raft timing.
type Timing struct {
	Heartbeat time.Duration
	Election  time.Duration
}

// DefaultTiming lets sessions of one second live: etcd raises every lease
// to at least 1.5 election timeouts, rounded up to whole seconds, so that a
// lease outlives a leader election. Its defaults (100 ms, 1 s) make that
// 2 s; an election timeout of 600 ms makes it 1 s and still leaves six
// heartbeats of slack on a busy machine.
var DefaultTiming = Timing{Heartbeat: 100 * time.Millisecond, Election: 600 * time.Millisecond}

// TimingFrom reads the timing from run params; a missing value is the
// default. On error it returns DefaultTiming with the error.
func TimingFrom(params map[string]string) (Timing, error) {
	t := DefaultTiming
	for name, d := range map[string]*time.Duration{ParamHeartbeat: &t.Heartbeat, ParamElection: &t.Election} {
		s, ok := params[name]
		if !ok || s == "" {
			continue
		}
		v, err := time.ParseDuration(s)
		if err != nil || v <= 0 || v%time.Millisecond != 0 {
			return DefaultTiming, fmt.Errorf("--%s %q: want a positive whole number of milliseconds such as 100ms", name, s)
		}
		*d = v
	}
	if t.Election < 5*t.Heartbeat {
		return DefaultTiming, fmt.Errorf("--%s %s must be at least 5 times --%s %s (etcd refuses to start otherwise)", ParamElection, t.Election, ParamHeartbeat, t.Heartbeat)
	}
	return t, nil
}

// MinTTL is the shortest lease etcd grants with this timing; it raises
// shorter ones silently (etcdserver: 3/2 of the election ticks, rounded up
// to whole seconds).
func (t Timing) MinTTL() time.Duration {
	ticks := (3 * int64(t.Election/t.Heartbeat)) / 2
	return time.Duration(math.Ceil((time.Duration(ticks) * t.Heartbeat).Seconds())) * time.Second
}

// Node describes one member: program is the lockcheck executable, which
// becomes a member when started with MemberEnv set. It listens on two
// loopback ports, clients then peers, and keeps its data and its log in its
// node directory.
func Node(name, program string, t Timing) backends.NodeSpec {
	return backends.NodeSpec{
		Name:    name,
		Program: program,
		Ports:   2,
		Args: func(self backends.Endpoint, all []backends.Endpoint) []string {
			peers := make([]string, len(all))
			for i, e := range all {
				peers[i] = e.Name + "=" + peerURL(e)
			}
			return []string{
				memberCommand,
				"--name", self.Name,
				"--dir", self.Dir,
				"--client-port", strconv.Itoa(self.Ports[0]),
				"--peer-port", strconv.Itoa(self.Ports[1]),
				"--initial-cluster", strings.Join(peers, ","),
				"--heartbeat", t.Heartbeat.String(),
				"--election", t.Election.String(),
			}
		},
		Env:       []string{MemberEnv + "=1"},
		DataPaths: []string{dataDir},
		Ready:     listening,
		Version:   version,
	}
}

// dataDir is the member's data directory inside its node directory.
const dataDir = "data"

// walSegmentBytes is the size of a member's WAL segment files.
const walSegmentBytes = 4 << 20

// LogFile is the member's log inside its node directory.
const LogFile = "etcd.log"

func peerURL(e backends.Endpoint) string { return "http://127.0.0.1:" + strconv.Itoa(e.Ports[1]) }

// listening is a member's own readiness: its client port accepts
// connections. A lone member of a new cluster cannot serve requests before
// a quorum started; the topology's Ready waits for the leader.
func listening(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return conn.Close()
}

func version(ctx context.Context, addr string) (string, error) {
	st, err := status(ctx, addr)
	if err != nil {
		return "", err
	}
	return "etcd " + st.Version + " (embedded)", nil
}

// RunMemberFromEnv runs this process as an etcd member if MemberEnv is set,
// until the process is killed. A member that cannot start or stops with an
// error ends the process with status 3.
func RunMemberFromEnv() bool {
	if os.Getenv(MemberEnv) == "" {
		return false
	}
	err := runMember(os.Args[1:])
	fmt.Fprintln(os.Stderr, "lockcheck etcd member:", err)
	os.Exit(3)
	return true
}

// runMember starts a member from its command line and returns when it
// stops, which it only does on an error.
func runMember(args []string) error {
	if len(args) == 0 || args[0] != memberCommand {
		return fmt.Errorf("%s is set but the command line is not %q", MemberEnv, memberCommand)
	}
	fs := flag.NewFlagSet(memberCommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the error says what is wrong
	var (
		name, dir, initial   string
		clientPort, peerPort int
		t                    Timing
	)
	fs.StringVar(&name, "name", "", "member name")
	fs.StringVar(&dir, "dir", "", "node directory")
	fs.IntVar(&clientPort, "client-port", 0, "loopback port for clients")
	fs.IntVar(&peerPort, "peer-port", 0, "loopback port for peers")
	fs.StringVar(&initial, "initial-cluster", "", "name=peer-url,... of every member")
	fs.DurationVar(&t.Heartbeat, "heartbeat", DefaultTiming.Heartbeat, "raft heartbeat interval")
	fs.DurationVar(&t.Election, "election", DefaultTiming.Election, "raft election timeout")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if name == "" || dir == "" || clientPort == 0 || peerPort == 0 || initial == "" {
		return errors.New("--name, --dir, --client-port, --peer-port and --initial-cluster are required")
	}
	clientURL := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(clientPort)}
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(peerPort)}

	cfg := embed.NewConfig()
	cfg.Name = name
	cfg.Dir = filepath.Join(dir, dataDir)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = initial
	cfg.InitialClusterToken = "lockcheck"
	// A restarted member finds its data directory and ignores this.
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.TickMs = uint(t.Heartbeat / time.Millisecond)
	cfg.ElectionMs = uint(t.Election / time.Millisecond)
	cfg.LogOutputs = []string{filepath.Join(dir, LogFile)}
	// Only etcd's own flag parsing sets this default; left at zero, every
	// request is logged as slow.
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration

	// etcd preallocates two 64 MB WAL segments per member; a run directory
	// keeps every member's data as evidence, and a run writes a few MB.
	wal.SegmentSizeBytes = walSegmentBytes

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	// The process exits right after: like the SIGKILL that ends a member
	// in every other case, nothing is closed gracefully.
	if err := <-e.Err(); err != nil {
		return err
	}
	return errors.New("the member stopped")
}
