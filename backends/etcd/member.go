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

	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/etcd/server/v3/storage/wal"

	"github.com/lockcheck/lockcheck/backends"
)

// MemberEnv marks a process lockcheck started as an etcd member: lockcheck
// re-executes itself, so no etcd binary is needed.
const MemberEnv = "LOCKCHECK_ETCD_MEMBER"

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

// Node describes one member. Its command line is etcd's own, so that the
// same arguments start a member of an etcd image under the docker runtime
// and lockcheck's embedded member as a local process: program is the
// lockcheck executable, which becomes a member when started with MemberEnv
// set (or under the name etcd). It listens on two ports, clients then
// peers, and keeps its data and its log in its node directory.
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
				"--name", self.Name,
				"--data-dir", filepath.Join(self.Dir, dataDir),
				"--listen-client-urls", "http://" + net.JoinHostPort(self.BindAddr(), strconv.Itoa(self.ListenPort(0))),
				"--advertise-client-urls", "http://" + self.AddrOf(0),
				"--listen-peer-urls", "http://" + net.JoinHostPort(self.BindAddr(), strconv.Itoa(self.ListenPort(1))),
				"--initial-advertise-peer-urls", peerURL(self),
				"--initial-cluster", strings.Join(peers, ","),
				"--initial-cluster-token", clusterToken,
				// A restarted member finds its data directory and ignores this.
				"--initial-cluster-state", "new",
				"--heartbeat-interval", strconv.FormatInt(t.Heartbeat.Milliseconds(), 10),
				"--election-timeout", strconv.FormatInt(t.Election.Milliseconds(), 10),
				// Relative to the node directory, where the member runs:
				// etcd splits this flag at commas, which a path may hold.
				"--log-outputs", LogFile,
			}
		},
		Env:       []string{MemberEnv + "=1"},
		Caller:    PeerCaller,
		Proxyable: true,
		DataPaths: []string{dataDir},
		Ready:     listening,
		Version:   version,
		Image:     Image,
		Command:   "etcd",
	}
}

// Image is the container image of etcd members: the lockcheck executable,
// which runs as a member under the name etcd, with etcd's own flags.
var Image = &backends.Image{
	Kind: "etcd", Tag: "lockcheck/etcd:local", Port: 2379,
	Runs:       "etcd members (etcd on PATH)",
	Contents:   "this lockcheck executable, which runs as an etcd member under the name etcd, with the libraries it links (none if static)",
	Self:       "lockcheck",
	Links:      map[string]string{"etcd": "lockcheck"},
	Entrypoint: "etcd",
}

// dataDir is the member's data directory inside its node directory.
const dataDir = "data"

// walSegmentBytes is the size of a member's WAL segment files.
const walSegmentBytes = 4 << 20

// LogFile is the member's log inside its node directory.
const LogFile = "etcd.log"

func peerURL(e backends.Endpoint) string { return "http://" + e.AddrOf(1) }

// clusterToken is the members' --initial-cluster-token, part of each
// member's ID.
const clusterToken = "lockcheck"

// PeerCaller names the member that opened a connection to a peer port:
// every raft message and stream request a member sends carries its member
// ID (X-Server-From), which etcd derives from its peer URL and the cluster
// token. The member's own connections cannot come from an address of its
// choosing: etcd binds them to an advertised address only when that is not
// loopback.
func PeerCaller(all []backends.Endpoint) func(head []byte) string {
	ids := map[string]string{}
	for _, e := range all {
		if len(e.Ports) < 2 {
			continue
		}
		urls, err := types.NewURLs([]string{peerURL(e)})
		if err != nil {
			continue
		}
		ids[membership.NewMember(e.Name, urls, clusterToken, nil).ID.String()] = e.Name
	}
	return func(head []byte) string {
		for _, line := range strings.Split(string(head), "\r\n") {
			if name, ok := strings.CutPrefix(line, "X-Server-From: "); ok {
				return ids[name]
			}
		}
		return ""
	}
}

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

// version is what the member says it runs. The run records it under the
// program (lockcheck's embedded member) or the image (any etcd) it ran.
func version(ctx context.Context, addr string) (string, error) {
	st, err := status(ctx, addr)
	if err != nil {
		return "", err
	}
	return "etcd " + st.Version, nil
}

// RunMemberFromEnv runs this process as an etcd member if MemberEnv is set
// or it was started under the name etcd (as in lockcheck's etcd image),
// until the process is killed. A member that cannot start or stops with an
// error ends the process with status 3.
func RunMemberFromEnv() bool {
	if os.Getenv(MemberEnv) == "" && filepath.Base(os.Args[0]) != "etcd" {
		return false
	}
	err := runMember(os.Args[1:])
	fmt.Fprintln(os.Stderr, "lockcheck etcd member:", err)
	os.Exit(3)
	return true
}

// runMember starts a member from etcd's own flags (the subset lockcheck
// uses) and returns when it stops, which it only does on an error.
func runMember(args []string) error {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the error says what is wrong
	var (
		name, dataDir, initial, token, state, logOutputs string
		listenClient, advertiseClient                    string
		listenPeer, advertisePeer                        string
		heartbeatMs, electionMs                          int
	)
	fs.StringVar(&name, "name", "", "member name")
	fs.StringVar(&dataDir, "data-dir", "", "data directory")
	fs.StringVar(&listenClient, "listen-client-urls", "", "URL to serve clients on")
	fs.StringVar(&advertiseClient, "advertise-client-urls", "", "URL clients reach the member at")
	fs.StringVar(&listenPeer, "listen-peer-urls", "", "URL to serve peers on")
	fs.StringVar(&advertisePeer, "initial-advertise-peer-urls", "", "URL peers reach the member at")
	fs.StringVar(&initial, "initial-cluster", "", "name=peer-url,... of every member")
	fs.StringVar(&token, "initial-cluster-token", "lockcheck", "cluster token")
	fs.StringVar(&state, "initial-cluster-state", embed.ClusterStateFlagNew, "new or existing")
	fs.IntVar(&heartbeatMs, "heartbeat-interval", int(DefaultTiming.Heartbeat/time.Millisecond), "raft heartbeat interval in ms")
	fs.IntVar(&electionMs, "election-timeout", int(DefaultTiming.Election/time.Millisecond), "raft election timeout in ms")
	fs.StringVar(&logOutputs, "log-outputs", "stderr", "where the log goes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if name == "" || dataDir == "" || listenClient == "" || listenPeer == "" || initial == "" {
		return errors.New("--name, --data-dir, --listen-client-urls, --listen-peer-urls and --initial-cluster are required")
	}
	if advertiseClient == "" {
		advertiseClient = listenClient
	}
	if advertisePeer == "" {
		advertisePeer = listenPeer
	}
	urls := map[string][]url.URL{}
	for flagName, value := range map[string]string{
		"listen-client-urls": listenClient, "advertise-client-urls": advertiseClient,
		"listen-peer-urls": listenPeer, "initial-advertise-peer-urls": advertisePeer,
	} {
		u, err := url.Parse(value)
		if err != nil || u.Host == "" {
			return fmt.Errorf("--%s %q: want a URL such as http://127.0.0.1:2379", flagName, value)
		}
		urls[flagName] = []url.URL{*u}
	}

	cfg := embed.NewConfig()
	cfg.Name = name
	cfg.Dir = dataDir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = urls["listen-client-urls"], urls["advertise-client-urls"]
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = urls["listen-peer-urls"], urls["initial-advertise-peer-urls"]
	cfg.InitialCluster = initial
	cfg.InitialClusterToken = token
	cfg.ClusterState = state
	cfg.TickMs = uint(heartbeatMs)
	cfg.ElectionMs = uint(electionMs)
	cfg.LogOutputs = strings.Split(logOutputs, ",")
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
