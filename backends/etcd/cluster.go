package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/history"
)

// statusTimeout bounds the question to one member: a stopped member never
// answers, and the others must not wait for it.
const statusTimeout = 500 * time.Millisecond

// status asks the member at addr about itself. Status is answered from the
// member's own raft state, without a quorum.
func status(ctx context.Context, addr string) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: statusTimeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	return cli.Status(ctx, addr)
}

// memberStatus is one member's answer, or why it gave none.
type memberStatus struct {
	name string
	addr string
	resp *clientv3.StatusResponse
	err  error
}

// statusAll asks every member at once.
func statusAll(ctx context.Context, members []backends.Endpoint) []memberStatus {
	out := make([]memberStatus, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := status(ctx, m.Addr())
			out[i] = memberStatus{name: m.Name, addr: m.Addr(), resp: resp, err: err}
		}()
	}
	wg.Wait()
	return out
}

// WaitReady waits until every member answers and all of them follow the
// same leader.
func WaitReady(ctx context.Context, members []backends.Endpoint) error {
	for {
		why := readiness(statusAll(ctx, members))
		if why == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", why, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// readiness says what keeps the cluster from being ready, or "".
func readiness(answers []memberStatus) string {
	var leader uint64
	for _, a := range answers {
		switch {
		case a.err != nil:
			return a.name + " does not answer: " + a.err.Error()
		case a.resp.Leader == 0:
			return a.name + " knows no leader"
		case leader != 0 && a.resp.Leader != leader:
			return "the members do not agree on a leader yet"
		}
		leader = a.resp.Leader
	}
	return ""
}

// Cluster is the nemesis's handle on a running etcd cluster.
type Cluster struct {
	members []backends.Endpoint
}

// NewCluster returns the handle on the cluster of these members.
func NewCluster(members []backends.Endpoint) *Cluster { return &Cluster{members: members} }

// Leader names the member that leads now, as the members that answer say:
// the leader of the highest raft term any of them knows. A stopped leader
// is still named until the others elect a new one.
func (c *Cluster) Leader(ctx context.Context) (string, error) {
	name, _, err := c.leader(ctx)
	return name, err
}

// leader is Leader with the raft term it leads in.
func (c *Cluster) leader(ctx context.Context) (string, uint64, error) {
	answers := statusAll(ctx, c.members)
	var (
		best      *clientv3.StatusResponse
		names     = map[uint64]string{}
		reachable []string
		failures  []string
	)
	for _, a := range answers {
		if a.err != nil {
			failures = append(failures, a.name+": "+a.err.Error())
			continue
		}
		names[a.resp.Header.MemberId] = a.name
		reachable = append(reachable, a.addr)
		if a.resp.Leader != 0 && (best == nil || a.resp.RaftTerm > best.RaftTerm) {
			best = a.resp
		}
	}
	if best == nil {
		return "", 0, fmt.Errorf("no member knows a leader (%d of %d answered; %s)", len(reachable), len(c.members), strings.Join(failures, "; "))
	}
	if name, ok := names[best.Leader]; ok {
		return name, best.RaftTerm, nil
	}
	// The leader itself did not answer: the members' list names it.
	name, err := memberName(ctx, reachable, best.Leader)
	return name, best.RaftTerm, err
}

// watchInterval is how often Watch asks who leads.
const watchInterval = 200 * time.Millisecond

// Watch records every change of leader it sees until ctx ends, as role
// events (see backends.WatchLeader).
func (c *Cluster) Watch(ctx context.Context, record func(verb string, v history.Value)) error {
	return backends.WatchLeader(ctx, watchInterval, func(ctx context.Context) (string, string, error) {
		name, term, err := c.leader(ctx)
		return name, fmt.Sprintf("term %d", term), err
	}, record)
}

// memberName looks a member's name up in the list the reachable members
// keep, without a quorum.
func memberName(ctx context.Context, addrs []string, id uint64) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: addrs, DialTimeout: statusTimeout, Logger: zap.NewNop()})
	if err != nil {
		return "", err
	}
	defer cli.Close()
	resp, err := cli.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return "", err
	}
	for _, m := range resp.Members {
		if m.ID == id {
			return m.Name, nil
		}
	}
	return "", errors.New("the leader is not in the member list")
}
