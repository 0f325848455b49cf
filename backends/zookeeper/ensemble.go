package zookeeper

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/history"
)

// statusTimeout bounds the question to one server: a stopped server never
// answers, and the others must not wait for it.
const statusTimeout = 500 * time.Millisecond

// fourLetterWord sends a four-letter word to the server at addr and returns
// its answer, which ends when the server closes the connection.
func fourLetterWord(ctx context.Context, addr, word string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl) //nolint:errcheck // a dead connection fails the write
	}
	if _, err := io.WriteString(conn, word); err != nil {
		return "", err
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// Status is what a server says of itself when asked srvr.
type Status struct {
	Version string // 3.8.0
	// Mode is leader or follower ("standalone", "observer" elsewhere); ""
	// while the server serves no requests (no quorum, an election).
	Mode string
	// Zxid is the last transaction the server saw; its high 32 bits are the
	// epoch of the leader that proposed it.
	Zxid int64
}

// Epoch is the leader epoch of the server's last transaction: it rises with
// every elected leader.
func (s Status) Epoch() int64 { return s.Zxid >> 32 }

// notServing is how a server without a quorum answers srvr.
const notServing = "This ZooKeeper instance is not currently serving requests"

// parseSrvr reads srvr's "Key: value" lines.
func parseSrvr(out string) (Status, error) {
	var st Status
	if strings.HasPrefix(strings.TrimSpace(out), notServing) {
		return st, nil
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch key {
		case "Zookeeper version":
			st.Version, _, _ = strings.Cut(value, "-")
			st.Version, _, _ = strings.Cut(st.Version, ",")
		case "Mode":
			st.Mode = value
		case "Zxid":
			z, err := strconv.ParseInt(strings.TrimPrefix(value, "0x"), 16, 64)
			if err != nil {
				return st, fmt.Errorf("srvr: Zxid %q: %v", value, err)
			}
			st.Zxid = z
		}
	}
	if st.Version == "" {
		return st, fmt.Errorf("srvr: not a ZooKeeper answer: %q", out)
	}
	return st, nil
}

// status asks the server at addr about itself.
func status(ctx context.Context, addr string) (Status, error) {
	out, err := fourLetterWord(ctx, addr, "srvr")
	if err != nil {
		return Status{}, err
	}
	return parseSrvr(out)
}

// answers is a server's own readiness: it answers srvr, which it does once
// it has loaded its data (a second after its port is bound, on a busy
// machine), so that a restarted server counts as started when it has its
// transactions back. A lone server of a new ensemble serves no requests
// before a quorum started; the topology's Ready waits for the leader.
func answers(ctx context.Context, addr string) error {
	out, err := fourLetterWord(ctx, addr, "srvr")
	if err == nil && out == "" {
		return errors.New("srvr: empty answer")
	}
	return err
}

// version is what the server says it runs.
func version(ctx context.Context, addr string) (string, error) {
	st, err := status(ctx, addr)
	if err != nil {
		return "", err
	}
	return "zookeeper " + st.Version, nil
}

// serverStatus is one server's answer, or why it gave none.
type serverStatus struct {
	name string
	st   Status
	err  error
}

// statusAll asks every server at once.
func statusAll(ctx context.Context, servers []backends.Endpoint) []serverStatus {
	out := make([]serverStatus, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := status(ctx, s.Addr())
			out[i] = serverStatus{name: s.Name, st: st, err: err}
		}()
	}
	wg.Wait()
	return out
}

// WaitReady waits until every server serves, one as the leader and the
// others as its followers, and the ensemble has committed a write: Root,
// which every lock lives under. Until then a fresh ensemble's first
// writes take seconds, which would show as a stall at the start of every
// run.
func WaitReady(ctx context.Context, servers []backends.Endpoint) error {
	for {
		why := readiness(statusAll(ctx, servers))
		if why == "" {
			return createRoot(ctx, servers)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", why, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// createRoot creates Root, if it is not there, through a session of its
// own.
func createRoot(ctx context.Context, servers []backends.Endpoint) error {
	conn, _, err := zk.Connect(backends.Addrs(servers), 10*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		return err
	}
	defer conn.Close()
	for {
		_, err = call(ctx, func() (string, error) { return conn.Create(Root, nil, 0, zk.WorldACL(zk.PermAll)) })
		if err == nil || errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("creating %s: %w", Root, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// quiet drops the library's log.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// readiness says what keeps the ensemble from being ready, or "".
func readiness(answers []serverStatus) string {
	leaders := 0
	for _, a := range answers {
		switch {
		case a.err != nil:
			return a.name + " does not answer: " + a.err.Error()
		case a.st.Mode == "":
			return a.name + " serves no requests yet"
		case a.st.Mode == "leader":
			leaders++
		case a.st.Mode != "follower":
			return a.name + " is a " + a.st.Mode + ", not a member of the ensemble"
		}
	}
	if leaders != 1 {
		return fmt.Sprintf("%d servers say they lead", leaders)
	}
	return ""
}

// Ensemble is the nemesis's handle on a running ensemble.
type Ensemble struct {
	servers []backends.Endpoint
}

// NewEnsemble returns the handle on the ensemble of these servers.
func NewEnsemble(servers []backends.Endpoint) *Ensemble { return &Ensemble{servers: servers} }

// Leader names the server that leads now, as the servers that answer say:
// the leader of the highest epoch among them. A stopped leader answers
// nothing, so the name moves as soon as the others elected a new one.
func (e *Ensemble) Leader(ctx context.Context) (string, error) {
	name, _, err := e.leader(ctx)
	return name, err
}

// leader is Leader with the epoch of its last transaction.
func (e *Ensemble) leader(ctx context.Context) (string, int64, error) {
	var (
		name     string
		epoch    int64 = -1
		failures []string
	)
	for _, a := range statusAll(ctx, e.servers) {
		switch {
		case a.err != nil:
			failures = append(failures, a.name+": "+a.err.Error())
		case a.st.Mode == "leader" && a.st.Epoch() > epoch:
			name, epoch = a.name, a.st.Epoch()
		}
	}
	if name == "" {
		if len(failures) == 0 {
			return "", 0, fmt.Errorf("no server says it leads (all %d answered: an election is under way)", len(e.servers))
		}
		return "", 0, fmt.Errorf("no server says it leads (%d of %d did not answer: %s)", len(failures), len(e.servers), strings.Join(failures, "; "))
	}
	return name, epoch, nil
}

// watchInterval is how often Watch asks who leads.
const watchInterval = 200 * time.Millisecond

// Watch records every change of leader it sees until ctx ends, as role
// events (see backends.WatchLeader).
func (e *Ensemble) Watch(ctx context.Context, record func(verb string, v history.Value)) error {
	return backends.WatchLeader(ctx, watchInterval, func(ctx context.Context) (string, string, error) {
		name, epoch, err := e.leader(ctx)
		return name, fmt.Sprintf("epoch %d", epoch), err
	}, record)
}
