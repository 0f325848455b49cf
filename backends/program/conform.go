package program

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/lockcheck/lockcheck/backends"
)

// The rules of the conformance check beyond the protocol's own.
const (
	RuleDeclare   = "init_ok names the library and its version"
	RuleGrant     = "acquire of a free lock is acquire_ok with a token and ttl_ms (and fence when supports.fence)"
	RuleRefusal   = "acquire while another client holds the lock is error code 40"
	RuleRelease   = "release of a held lock is release_ok with deleted true, and frees it"
	RuleNewGrant  = "every grant has a token of its own, and a fence above the key's earlier ones when supports.fence"
	RuleExpired   = "release after the lease ran out (the client stopped past it) is release_ok with deleted false"
	RuleRestart   = "a client killed after a timeout starts again and answers init"
	RuleFailpoint = "a declared failpoint aimed at in init is sent, and the client goes on after failpoint_ok"
)

// bg is the context of the check's operations: the program's Lock bounds
// each by its own timeout.
var bg = context.Background()

// Failure is one rule a client broke in the conformance check.
type Failure struct {
	// Message is the message at fault (init, acquire, ...).
	Message string
	Rule    string
	Detail  string
}

func (f Failure) String() string {
	return fmt.Sprintf("%s: %s (rule: %s)", f.Message, f.Detail, f.Rule)
}

// Conformance is what the check needs: a way to start the client in a
// slot (with the failpoints aimed at), keys that are free, and whether
// the topology's grants last until release (a session lock: no lease runs
// out).
type Conformance struct {
	Open func(slot string, failpoints []string, fp backends.Failpoint) (*Lock, error)
	// Keys are four free lock keys.
	Keys         [4]string
	TTL, Timeout time.Duration
	UntilRelease bool
}

// Check runs the client through the protocol: handshake, a grant, a
// certain refusal while another holds the lock, a release that deletes, a
// release after the lease ran out, an unknown outcome on a timeout, a
// failpoint round trip and a clean exit on EOF of stdin. It returns every
// rule broken; none means the client conforms.
func (c Conformance) Check() []Failure {
	var fails []Failure
	fail := func(msg, rule string, err error) {
		var v *Violation
		if errors.As(err, &v) {
			fails = append(fails, Failure{Message: msg, Rule: v.Rule, Detail: v.What()})
			return
		}
		fails = append(fails, Failure{Message: msg, Rule: rule, Detail: err.Error()})
	}
	a, err := c.Open("c0", nil, nil)
	if err != nil {
		fail("init", RuleInit, err)
		return fails
	}
	defer a.Close()
	if d := a.Declaration(); d.Library == "" || d.Version == "" {
		fail("init_ok", RuleDeclare, fmt.Errorf("library %q, version %q", d.Library, d.Version))
	}
	fenced := a.Declaration().Supports.Fence
	// The second client starts before the first takes the lock: an
	// interpreter's start can outlast a lease.
	b, err := c.Open("c1", nil, nil)
	if err != nil {
		fail("init", RuleInit, err)
		return fails
	}
	defer b.Close()

	key := c.Keys[0]
	g, err := a.Acquire(bg, key)
	if err != nil {
		fail("acquire", RuleGrant, err)
		return fails
	}
	switch {
	case g.TTL <= 0 && !c.UntilRelease:
		fail("acquire_ok", RuleGrant, errors.New("no ttl_ms"))
	case fenced && g.Fence == nil:
		fail("acquire_ok", RuleGrant, errors.New("no fence, though init_ok says supports.fence"))
	}

	if _, err := b.Acquire(bg, key); !errors.Is(err, backends.ErrNotAcquired) {
		fail("acquire", RuleRefusal, fmt.Errorf("another client holds %s, and the reply was %v", key, errOrGrant(err)))
	}
	deleted, err := a.Release(bg, key, g)
	switch {
	case err != nil:
		fail("release", RuleRelease, err)
	case !deleted:
		fail("release_ok", RuleRelease, errors.New("deleted false for the grant that holds the lock"))
	}
	if g2, err := b.Acquire(bg, key); err != nil {
		fail("acquire", RuleRelease, fmt.Errorf("after the release, acquire of %s: %v", key, err))
	} else {
		switch {
		case g2.Token == g.Token:
			fail("acquire_ok", RuleNewGrant, fmt.Errorf("the next grant of %s has the token %q again", key, g.Token))
		case fenced && g.Fence != nil && g2.Fence != nil && *g2.Fence <= *g.Fence:
			fail("acquire_ok", RuleNewGrant, fmt.Errorf("the next grant of %s has fence %d, not above %d", key, *g2.Fence, *g.Fence))
		}
		b.Release(bg, key, g2) //nolint:errcheck // tidying up
	}

	// A grant with no lease was named above; stopping the client past a
	// lease of 0 would test nothing.
	if !c.UntilRelease && g.TTL > 0 {
		key := c.Keys[1]
		if g, err := a.Acquire(bg, key); err != nil {
			fail("acquire", RuleGrant, err)
		} else {
			// The client is stopped, as a GC pause would stop it, so
			// that a library that renews its lease cannot.
			a.stopFor(g.TTL + g.TTL/2 + 50*time.Millisecond)
			if deleted, err := a.Release(bg, key, g); err != nil {
				fail("release", RuleExpired, err)
			} else if deleted {
				fail("release_ok", RuleExpired, fmt.Errorf("deleted true after the client was stopped for %s, past its %s lease", g.TTL+g.TTL/2, g.TTL))
			}
		}
	}

	c.checkTimeout(a, fail)
	c.checkFailpoint(a.Declaration(), fail)

	stderr := a.StderrBytes() + b.StderrBytes()
	if err := a.Close(); err != nil {
		fail("EOF", RuleEOF, err)
	}
	if err := b.Close(); err != nil {
		fail("EOF", RuleEOF, err)
	}
	if stderr > 2*StderrKeep {
		fail("stderr", RuleStderr, fmt.Errorf("%d bytes of stderr in a check of a few operations", stderr))
	}
	return fails
}

// checkTimeout stops the client (SIGSTOP) before it reads an acquire: the
// acquire's outcome is unknown, the client is killed, and the next
// operation starts it again.
func (c Conformance) checkTimeout(a *Lock, fail func(msg, rule string, err error)) {
	key := c.Keys[2]
	a.mu.Lock()
	p := a.cur
	a.mu.Unlock()
	if p == nil {
		fail("acquire", RuleRestart, errors.New("the client is not running"))
		return
	}
	p.stop()
	_, err := a.Acquire(bg, key)
	p.signal(syscall.SIGCONT)
	if err == nil || errors.Is(err, backends.ErrNotAcquired) {
		fail("acquire", RuleTime, fmt.Errorf("a stopped client's acquire was %v, not an unknown outcome", errOrGrant(err)))
		return
	}
	g, err := a.Acquire(bg, key)
	var v *Violation
	switch {
	case errors.As(err, &v) && (v.Rule == RuleStart || v.Rule == RuleInit):
		// It did not start again: that is the rule it broke, whatever
		// the start's own rule says.
		fail("init", RuleRestart, errors.New(v.What()))
		return
	case err != nil:
		// It started again and answered init; the acquire itself failed.
		fail("acquire", RuleGrant, fmt.Errorf("after the client was killed and started again, acquire of %s: %w", key, err))
		return
	}
	a.Release(bg, key, g) //nolint:errcheck // tidying up
}

// checkFailpoint starts a client with every failpoint it declared aimed
// at, holds a lock for two leases, and expects at least one failpoint
// message, which it answers.
func (c Conformance) checkFailpoint(d Declaration, fail func(msg, rule string, err error)) {
	if len(d.Failpoints) == 0 {
		return
	}
	hit := make(chan string, 16)
	f, err := c.Open("c2", d.Failpoints, func(name string) {
		select {
		case hit <- name:
		default:
		}
	})
	if err != nil {
		fail("init", RuleInit, err)
		return
	}
	defer f.Close()
	key := c.Keys[3]
	g, err := f.Acquire(bg, key)
	if err != nil {
		fail("acquire", RuleGrant, err)
		return
	}
	select {
	case <-hit:
	case <-time.After(2*c.TTL + c.Timeout):
		fail("failpoint", RuleFailpoint, fmt.Errorf("declared %v, aimed at all, and none was sent while a lock was held for %s", d.Failpoints, 2*c.TTL+c.Timeout))
	}
	if _, err := f.Release(bg, key, g); err != nil {
		fail("release", RuleFailpoint, fmt.Errorf("after failpoint_ok: %v", err))
	}
}

func errOrGrant(err error) string {
	if err == nil {
		return "a grant"
	}
	return err.Error()
}

// stopFor stops the running program for d.
func (l *Lock) stopFor(d time.Duration) {
	l.mu.Lock()
	p := l.cur
	l.mu.Unlock()
	if p == nil {
		return
	}
	p.stop()
	time.Sleep(d)
	p.signal(syscall.SIGCONT)
}
