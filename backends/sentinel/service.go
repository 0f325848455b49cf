package sentinel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/history"
)

// Service is the handle a fault gets on a running Sentinel topology
// (catalog's Service): who is master, the master's replication links, the
// sentinels' announcements, every node's role. It names nodes as the
// topology does (redis-0, sentinel-1), never by address.
type Service struct {
	data      []backends.Endpoint // redis-0, redis-1, redis-2
	sentinels []backends.Endpoint
	names     map[string]string // "127.0.0.1:port" -> node name
}

// NewService returns the handle on the topology at all.
func NewService(all []backends.Endpoint) *Service {
	c := &Service{names: map[string]string{}}
	for i := 0; i < dataNodes; i++ {
		c.data = append(c.data, endpoint(all, DataName(i)))
	}
	for i := 0; i < sentinelNodes; i++ {
		c.sentinels = append(c.sentinels, endpoint(all, SentinelName(i)))
	}
	for _, e := range all {
		c.names[e.Addr()] = e.Name
	}
	return c
}

// name is the node at addr, or addr itself if it is none of the topology's.
func (c *Service) name(addr string) string {
	if n, ok := c.names[addr]; ok {
		return n
	}
	return addr
}

func (c *Service) dataNode(name string) (backends.Endpoint, error) {
	for _, e := range c.data {
		if e.Name == name {
			return e, nil
		}
	}
	return backends.Endpoint{}, fmt.Errorf("%s is not a redis-server node of the topology", name)
}

// Master is the node a majority of the sentinels name as master. During a
// failover they may disagree for a moment; that is an error.
func (c *Service) Master(ctx context.Context) (string, error) {
	votes := map[string]int{}
	var answers []string
	for _, s := range c.sentinels {
		sc := sentinelClient(s.Addr())
		addr, err := sc.GetMasterAddrByName(ctx, MasterName).Result()
		sc.Close()
		if err != nil || len(addr) != 2 {
			answers = append(answers, s.Name+": no answer")
			continue
		}
		n := c.name(net.JoinHostPort(addr[0], addr[1]))
		votes[n]++
		answers = append(answers, s.Name+": "+n)
		if votes[n] > sentinelNodes/2 {
			return n, nil
		}
	}
	return "", fmt.Errorf("no majority of sentinels names one master (%s)", strings.Join(answers, ", "))
}

// Settled checks once that the service is whole, so that a fault finds it
// as a run starts: every sentinel names the same master, flags it with
// nothing but "master" (no failover in progress, not down), and every other
// redis-server node is a connected replica of it that has applied all its
// writes. It names the master. A failover started before the previous one
// ended everywhere can leave a sentinel stuck in it.
func (c *Service) Settled(ctx context.Context) (string, error) {
	master := ""
	for _, s := range c.sentinels {
		sc := sentinelClient(s.Addr())
		m, err := sc.Master(ctx, MasterName).Result()
		sc.Close()
		if err != nil {
			return "", fmt.Errorf("%s: %w", s.Name, err)
		}
		name := c.name(net.JoinHostPort(m["ip"], m["port"]))
		switch {
		case master != "" && name != master:
			return "", fmt.Errorf("%s names %s as master, another sentinel %s", s.Name, name, master)
		case m["flags"] != "master":
			return "", fmt.Errorf("%s flags master %s %s", s.Name, name, m["flags"])
		}
		master = name
	}
	return master, c.Replicated(ctx, master)
}

// WaitSettled waits until Settled holds and names the master.
func (c *Service) WaitSettled(ctx context.Context) (string, error) {
	var master string
	err := poll(ctx, 50*time.Millisecond, func() error {
		m, err := c.Settled(ctx)
		master = m
		return err
	})
	return master, err
}

// WaitAgreed waits until every sentinel has switched to master and
// announced it (+switch-master) to its subscribers, such as the clients.
// The leader of a failover announces it only once the other replicas follow
// the new master, about a second after the promotion, though it already
// answers GET-MASTER-ADDR-BY-NAME with it; the other sentinels learn of it
// from hello messages, up to two seconds later. Until then a client may
// still send its commands to the old master. A sentinel's SENTINEL MASTER
// names the new master exactly when it has announced it.
func (c *Service) WaitAgreed(ctx context.Context, master string) error {
	m, err := c.dataNode(master)
	if err != nil {
		return err
	}
	return poll(ctx, 50*time.Millisecond, func() error {
		for _, s := range c.sentinels {
			sc := sentinelClient(s.Addr())
			info, err := sc.Master(ctx, MasterName).Result()
			sc.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", s.Name, err)
			}
			if net.JoinHostPort(info["ip"], info["port"]) != m.Addr() {
				return fmt.Errorf("%s has not switched to %s yet", s.Name, master)
			}
		}
		return nil
	})
}

// Leader is the master: the node that takes every write, for faults that
// aim at a service's leader.
func (c *Service) Leader(ctx context.Context) (string, error) { return c.Master(ctx) }

// Replicas names the redis-server nodes other than master.
func (c *Service) Replicas(master string) []string {
	var out []string
	for _, e := range c.data {
		if e.Name != master {
			out = append(out, e.Name)
		}
	}
	return out
}

// Replicated checks once that every other redis-server node is a connected
// replica of master and has applied everything master had written when it
// was asked.
func (c *Service) Replicated(ctx context.Context, master string) error {
	m, err := c.dataNode(master)
	if err != nil {
		return err
	}
	info, err := replication(ctx, m.Addr())
	if err != nil {
		return fmt.Errorf("%s: %w", master, err)
	}
	if info["role"] != "master" {
		return fmt.Errorf("%s is not a master (role %s)", master, info["role"])
	}
	offset, _ := strconv.ParseInt(info["master_repl_offset"], 10, 64)
	for _, name := range c.Replicas(master) {
		r, _ := c.dataNode(name)
		info, err := replication(ctx, r.Addr())
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		applied, _ := strconv.ParseInt(info["slave_repl_offset"], 10, 64)
		switch {
		case info["role"] != "slave" || net.JoinHostPort(info["master_host"], info["master_port"]) != m.Addr():
			return fmt.Errorf("%s is not a replica of %s", name, master)
		case info["master_link_status"] != "up" || info["master_sync_in_progress"] != "0":
			return fmt.Errorf("%s is not yet in sync with %s", name, master)
		case applied < offset:
			return fmt.Errorf("%s has applied %d of %d bytes of %s's replication stream", name, applied, offset, master)
		}
	}
	return nil
}

// WaitReplicated waits until Replicated holds.
func (c *Service) WaitReplicated(ctx context.Context, master string) error {
	return poll(ctx, 20*time.Millisecond, func() error { return c.Replicated(ctx, master) })
}

// CutReplicas closes master's connections to its replicas (CLIENT KILL TYPE
// replica). A replica that is stopped cannot reconnect, so from then on
// master's writes reach nobody. It says how it cut them, for the history.
func (c *Service) CutReplicas(ctx context.Context, master string) (string, error) {
	m, err := c.dataNode(master)
	if err != nil {
		return "", err
	}
	rdb := client(m.Addr())
	defer rdb.Close()
	return "CLIENT KILL TYPE replica", rdb.ClientKillByFilter(ctx, "TYPE", "replica").Err()
}

// AwaitSwitch subscribes to +switch-master on the sentinels and returns a
// wait that blocks until the master moves away from `from` and names the
// promoted node. Subscribe before causing the failover, so the announcement
// cannot be missed. The wait gives up after the longest a failover can take
// with the sentinels' own settings: down-after, plus twice the failover
// timeout (a sentinel waits that long after a previous failover), plus 5 s.
func (c *Service) AwaitSwitch(ctx context.Context, from string) (wait func() (string, error), err error) {
	old, err := c.dataNode(from)
	if err != nil {
		return nil, err
	}
	limit, err := c.switchLimit(ctx)
	if err != nil {
		return nil, err
	}
	msgs, stop, err := c.subscribe(ctx, "+switch-master")
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, stop)
	return func() (string, error) {
		defer stop()
		deadline := time.NewTimer(limit)
		defer deadline.Stop()
		// Every sentinel announces the switch; asking them now and then
		// also covers one whose announcement was lost with its connection.
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case m := <-msgs:
				if from, to, ok := parseSwitch(m.Payload); ok && from == old.Addr() {
					return c.name(to), nil
				}
			case <-tick.C:
				if m, err := c.Master(ctx); err == nil && m != old.Name {
					return m, nil
				}
			case <-deadline.C:
				return "", fmt.Errorf("the sentinels did not promote a replica of %s within %s", from, limit)
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
	}, nil
}

// switchLimit reads down-after and the failover timeout from a sentinel.
func (c *Service) switchLimit(ctx context.Context) (time.Duration, error) {
	var lastErr error
	for _, s := range c.sentinels {
		sc := sentinelClient(s.Addr())
		m, err := sc.Master(ctx, MasterName).Result()
		sc.Close()
		if err != nil {
			lastErr = err
			continue
		}
		down, err1 := strconv.Atoi(m["down-after-milliseconds"])
		failover, err2 := strconv.Atoi(m["failover-timeout"])
		if err := errors.Join(err1, err2); err != nil {
			return 0, fmt.Errorf("%s: SENTINEL MASTER: %w", s.Name, err)
		}
		return time.Duration(down+2*failover)*time.Millisecond + 5*time.Second, nil
	}
	return 0, fmt.Errorf("no sentinel answered: %w", lastErr)
}

// parseSwitch reads a +switch-master payload: "<name> <old ip> <old port>
// <new ip> <new port>".
func parseSwitch(payload string) (from, to string, ok bool) {
	f := strings.Fields(payload)
	if len(f) != 5 || f[0] != MasterName {
		return "", "", false
	}
	return net.JoinHostPort(f[1], f[2]), net.JoinHostPort(f[3], f[4]), true
}

// role is a node's answer to ROLE.
type role struct {
	master string // the node it replicates; empty for a master
	linkUp bool   // a replica's link to its master is connected
}

func (r role) String() string {
	if r.master == "" {
		return "master"
	}
	return "replica of " + r.master
}

func (c *Service) role(ctx context.Context, node string) (role, error) {
	n, err := c.dataNode(node)
	if err != nil {
		return role{}, err
	}
	rdb := client(n.Addr())
	defer rdb.Close()
	reply, err := rdb.Do(ctx, "ROLE").Slice()
	if err != nil {
		return role{}, err
	}
	if len(reply) >= 4 && reply[0] == "slave" {
		port, _ := reply[2].(int64)
		state, _ := reply[3].(string)
		host, _ := reply[1].(string)
		return role{master: c.name(net.JoinHostPort(host, strconv.FormatInt(port, 10))), linkUp: state == "connected"}, nil
	}
	if len(reply) > 0 && reply[0] == "master" {
		return role{}, nil
	}
	return role{}, fmt.Errorf("%s: unexpected ROLE reply %v", node, reply)
}

// Role is what node reports itself to be: "master" or "replica of redis-1".
func (c *Service) Role(ctx context.Context, node string) (string, error) {
	r, err := c.role(ctx, node)
	if err != nil {
		return "", err
	}
	return r.String(), nil
}

// WaitReplicaOf waits until node is a replica of master with its link up:
// an old master has rejoined. The sentinels convert a returning old master
// only after it has reported its stale role for some seconds, so this takes
// about ten seconds after the node is back.
func (c *Service) WaitReplicaOf(ctx context.Context, node, master string) error {
	return poll(ctx, 100*time.Millisecond, func() error {
		r, err := c.role(ctx, node)
		if err != nil {
			return err
		}
		if r.master != master || !r.linkUp {
			return fmt.Errorf("%s is %s, not yet a connected replica of %s", node, r, master)
		}
		return nil
	})
}

// Watch records, until ctx ends, what the service does on its own: every
// node's role when it starts, then each promotion (+switch-master) and each
// role a node reports anew, as history.NemSwitchMaster and history.NemRole
// events. Every sentinel announces the same change; only changes are
// recorded.
func (c *Service) Watch(ctx context.Context, record func(verb string, v history.Value)) error {
	msgs, stop, err := c.subscribe(ctx, "+switch-master", "+role-change", "-role-change", "+slave-reconf-done")
	if err != nil {
		return err
	}
	defer stop()
	w := &watcher{c: c, record: record, roles: map[string]string{}}
	if w.master, err = c.Master(ctx); err != nil {
		w.master = c.data[0].Name
	}
	for _, n := range c.data {
		w.noteRole(ctx, n.Name, "")
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-msgs:
			w.handle(ctx, m)
		}
	}
}

type watcher struct {
	c      *Service
	record func(verb string, v history.Value)
	master string
	roles  map[string]string // node -> the role last recorded
}

func (w *watcher) handle(ctx context.Context, m *goredis.Message) {
	if m.Channel == "+switch-master" {
		from, to, ok := parseSwitch(m.Payload)
		if !ok || w.c.name(to) == w.master {
			return
		}
		w.master = w.c.name(to)
		w.record(history.NemSwitchMaster, history.Value{Target: w.master, Detail: w.c.name(from) + " -> " + w.master})
		return
	}
	// "<type> <name> <ip> <port> @ <master name> <ip> <port> ...": the
	// node's own ROLE says best what it became; the announcement is the
	// fallback when the node cannot answer.
	f := strings.Fields(m.Payload)
	if len(f) < 4 {
		return
	}
	node := w.c.name(net.JoinHostPort(f[2], f[3]))
	fallback := ""
	switch {
	case m.Channel == "+slave-reconf-done" && len(f) >= 8:
		fallback = "replica of " + w.c.name(net.JoinHostPort(f[6], f[7]))
	case f[len(f)-1] == "master":
		fallback = "master"
	}
	w.noteRole(ctx, node, fallback)
}

// noteRole records node's role if it changed.
func (w *watcher) noteRole(ctx context.Context, node, fallback string) {
	askCtx, cancel := context.WithTimeout(ctx, time.Second)
	role, err := w.c.Role(askCtx, node)
	cancel()
	if err != nil {
		role = fallback
	}
	if role == "" || w.roles[node] == role {
		return
	}
	w.roles[node] = role
	w.record(history.NemRole, history.Value{Target: node, Detail: role})
}

// subscribe listens to channels on every sentinel that answers within a
// second and merges their messages; stop ends it and closes the
// connections, and may be called more than once.
func (c *Service) subscribe(ctx context.Context, channels ...string) (<-chan *goredis.Message, func(), error) {
	out := make(chan *goredis.Message)
	done := make(chan struct{})
	var (
		wg      sync.WaitGroup
		closers []func() error
		errs    []error
	)
	for _, s := range c.sentinels {
		sc := sentinelClient(s.Addr())
		ps := sc.Subscribe(ctx, channels...)
		confirmCtx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := ps.Receive(confirmCtx)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Name, err))
			ps.Close()
			sc.Close()
			continue
		}
		closers = append(closers, ps.Close, sc.Close)
		ch := ps.Channel()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case m, ok := <-ch:
					if !ok {
						return
					}
					select {
					case out <- m:
					case <-done:
						return
					}
				case <-done:
					return
				}
			}
		}()
	}
	stop := sync.OnceFunc(func() {
		close(done)
		for _, closeConn := range closers {
			closeConn() //nolint:errcheck // closing connections we are done with
		}
		wg.Wait()
	})
	if len(closers) == 0 {
		stop()
		return nil, nil, fmt.Errorf("no sentinel took a subscription: %w", errors.Join(errs...))
	}
	return out, stop, nil
}

// replication is the node's INFO replication section.
func replication(ctx context.Context, addr string) (map[string]string, error) {
	rdb := client(addr)
	defer rdb.Close()
	info, err := rdb.InfoMap(ctx, "replication").Result()
	if err != nil {
		return nil, err
	}
	return info["Replication"], nil
}

// client connects to one node for one question. A stopped node must not
// hang a fault, hence the short timeouts; a question is asked once.
func client(addr string) *goredis.Client {
	return goredis.NewClient(&goredis.Options{
		Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, PoolSize: 1,
	})
}

// poll calls check every interval until it succeeds or ctx ends, and then
// returns its last error.
func poll(ctx context.Context, interval time.Duration, check func() error) error {
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}
