package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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
	s := &Service{nodes: map[string]string{}}
	for _, e := range eps {
		s.nodes[e.Name] = e.Addr()
	}
	return s
}

// TerminateSession ends the server session named session (node/pid, as a
// grant names it) with pg_terminate_backend, and reports whether the
// server found that backend to terminate.
func (s *Service) TerminateSession(ctx context.Context, session string) (bool, error) {
	node, pidText, ok := strings.Cut(session, "/")
	pid, err := strconv.Atoi(pidText)
	addr, known := s.nodes[node]
	if !ok || err != nil || !known {
		return false, fmt.Errorf("postgres: %q names no session of this run's nodes", session)
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
