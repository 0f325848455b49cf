package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/lockcheck/lockcheck/backends"
)

// Service is the nemesis's handle on the PostgreSQL nodes of a run: it
// terminates a client's session the way an idle-session timeout or an
// operator does.
type Service struct {
	nodes map[string]string // node name -> client address
}

// NewService is the handle on the nodes eps.
func NewService(eps []backends.Endpoint) *Service {
	return &Service{nodes: backends.AddrsByName(eps)}
}

// TerminateSession ends the server session named session (node/pid, as a
// grant names it) with pg_terminate_backend, and reports whether the
// server found that backend to terminate.
func (s *Service) TerminateSession(ctx context.Context, session string) (bool, error) {
	addr, pid, err := backends.SessionOn(s.nodes, session)
	if err != nil {
		return false, fmt.Errorf("postgres: %w", err)
	}
	conn, err := Connect(ctx, addr, 2*time.Second)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	var done bool
	err = conn.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&done)
	return done, err
}

// Prepare creates what the clients of a fresh node need: the fence
// sequence of --fence-source lock.
func Prepare(ctx context.Context, addr string) error {
	conn, err := Connect(ctx, addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, `CREATE SEQUENCE IF NOT EXISTS `+FenceSequence)
	return err
}

// Replicated reports whether the nodes eps include a streaming standby.
func Replicated(eps []backends.Endpoint) bool {
	for _, e := range eps {
		if e.Name == Standby {
			return true
		}
	}
	return false
}

// ReplicatedService is the handle on a primary and its streaming standby:
// besides terminating sessions it promotes the standby, which PostgreSQL
// never does by itself (failover-promote).
type ReplicatedService struct {
	*Service
}

// NewReplicatedService is the handle on the nodes eps, a primary and its
// standby.
func NewReplicatedService(eps []backends.Endpoint) *ReplicatedService {
	return &ReplicatedService{Service: NewService(eps)}
}

// names are the cluster's nodes, sorted.
func (s *ReplicatedService) names() []string { return slices.Sorted(maps.Keys(s.nodes)) }

// Streaming names the node that accepts writes and a standby streaming
// from it ("" when none does). A node that does not answer is neither.
func (s *ReplicatedService) Streaming(ctx context.Context) (primary, standby string, err error) {
	for _, name := range s.names() {
		conn, err := Connect(ctx, s.nodes[name], 2*time.Second)
		if err != nil {
			continue
		}
		var inRecovery bool
		err = conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&inRecovery)
		if err == nil && !inRecovery {
			primary = name
			err = conn.QueryRow(ctx, `SELECT coalesce(min(application_name), '') FROM pg_stat_replication WHERE state = 'streaming'`).Scan(&standby)
		}
		conn.Close(context.Background()) //nolint:errcheck // read what was needed
		if primary != "" {
			return primary, standby, err
		}
	}
	return "", "", errors.New("postgres: no node accepts writes")
}

// WaitStreaming waits until standby streams from primary, as the
// primary's pg_stat_replication shows (the standby's walreceiver reports
// its cluster_name, the node's name, as application_name).
func (s *ReplicatedService) WaitStreaming(ctx context.Context, primary, standby string) error {
	for {
		p, st, err := s.Streaming(ctx)
		if err == nil && p == primary && st == standby {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres: %s is not streaming from %s: %w", standby, primary, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Promote makes standby the primary with pg_promote, which waits until it
// accepts writes.
func (s *ReplicatedService) Promote(ctx context.Context, standby string) error {
	addr, ok := s.nodes[standby]
	if !ok {
		return fmt.Errorf("postgres: no node %s to promote", standby)
	}
	conn, err := Connect(ctx, addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var promoted bool
	if err := conn.QueryRow(ctx, `SELECT pg_promote(true, 60)`).Scan(&promoted); err != nil {
		return err
	}
	if !promoted {
		return fmt.Errorf("postgres: %s was not promoted within 60 s", standby)
	}
	return nil
}
