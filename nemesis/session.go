package nemesis

import (
	"context"
	"errors"
	"time"

	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads"
)

func init() {
	register(Fault{Name: "kill-session", Inject: KillSession, Needs: []Capability{CapSessions},
		Help: "terminate the server session the lock of the client that holds it lives on, the server's own way (PostgreSQL: pg_terminate_backend), right before its write, as an idle-session timeout or an operator does; the client learns at its next statement"})
}

// SessionKiller is a service whose locks live on server sessions: the
// handle (Targets.Service) of a backend whose locks do offers it.
type SessionKiller interface {
	// TerminateSession ends the named session and reports whether the
	// server found it to end.
	TerminateSession(ctx context.Context, session string) (bool, error)
}

// SessionHolder is a client whose current grant is bound to a server
// session; Session names it.
type SessionHolder interface {
	Session() string
}

// ErrNoSessions means the backend's locks live on no session a fault can
// terminate.
var ErrNoSessions = errors.New("the lock service has no sessions to terminate (kill-session needs a backend whose locks live on server sessions)")

// KillSession parks the holder right before its write, terminates its
// server session, and lets it go on after env.Pause, time enough for
// another client to take the lock the session held. The event is recorded
// before the terminate is sent, so its time is no later than the lease's
// end; a terminate that did not land is recorded again with Detail
// "missed: ...", which the checker reads as no kill. It lands when the
// server terminated the session.
func KillSession(ctx context.Context, env *Env) (Landing, error) {
	svc, ok := env.Targets.Service().(SessionKiller)
	if !ok {
		return Landing{}, ErrNoSessions
	}
	c, leave, err := parkHolder(ctx, env, workloads.FailpointBeforeWrite)
	if err != nil || c == nil {
		return missed("no client held the lock and reached its write within %s", env.Patience), err
	}
	defer leave()
	holder, ok := c.(SessionHolder)
	if !ok || holder.Session() == "" {
		return missed("%s holds its lock on no server session", c.Name()), nil
	}
	v := history.Value{Target: c.Name(), PID: c.PID(), Session: holder.Session(), Failpoint: workloads.FailpointBeforeWrite}
	env.Record(history.NemKillSession, v)
	killCtx, cancel := context.WithTimeout(ctx, env.OpTimeout+time.Second)
	terminated, err := svc.TerminateSession(killCtx, v.Session)
	cancel()
	switch {
	case err != nil:
		v.Detail = history.MissedPrefix + err.Error()
	case !terminated:
		v.Detail = history.MissedPrefix + "the server found no backend " + v.Session
	}
	if v.Detail != "" {
		env.Record(history.NemKillSession, v)
		return missed("%s: %s", v.Session, v.Detail), nil
	}
	sleepCtx(ctx, env.Pause)
	return landed("%s's session %s was terminated before its write; it went on %s later", c.Name(), v.Session, env.Pause), nil
}
