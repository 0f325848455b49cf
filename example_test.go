package lockcheck_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/lockcheck/lockcheck"
)

// memLock is a lock that needs no server: a map in the worker process. It
// shows the shape of a Lock; across worker processes it is no lock at all,
// which lockcheck finds at once.
type memLock struct {
	mu   sync.Mutex
	held map[string]string
	cfg  lockcheck.Config
	next int
}

func (l *memLock) Acquire(_ context.Context, key string) (lockcheck.Grant, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, taken := l.held[key]; taken {
		return lockcheck.Grant{}, lockcheck.ErrNotAcquired
	}
	l.next++
	token := fmt.Sprint(l.next)
	l.held[key] = token
	return lockcheck.Grant{Token: token, TTL: l.cfg.TTL}, nil
}

func (l *memLock) Release(_ context.Context, key string, g lockcheck.Grant) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg.Failpoint.Hit("before-delete") // a scenario can stop the client here
	if l.held[key] != g.Token {
		return false, nil
	}
	delete(l.held, key)
	return true, nil
}

func (l *memLock) Close() error { return nil }

// A main package of your own registers your lock and hands the process to
// Main: `go run . run --backend memlock --nemesis pause-holder` then runs
// five worker processes of your executable against it, pauses the holder,
// checks the history and writes the report. (Not run here: Main exits.)
func ExampleRegister() {
	lockcheck.Register(lockcheck.Backend{
		Name:       "memlock",
		Failpoints: map[string][]string{"default": {"before-delete"}},
		Open: func(c lockcheck.Config) (lockcheck.Lock, error) {
			return &memLock{held: map[string]string{}, cfg: c}, nil
		},
	})
	lockcheck.Main()
}

// A lock declares its failpoints by name and calls Hit at each; outside a
// run the Failpoint is nil and Hit does nothing.
func ExampleFailpoint() {
	var outside lockcheck.Failpoint
	outside.Hit("before-delete")

	inRun := lockcheck.Failpoint(func(name string) { fmt.Println("reached", name) })
	inRun.Hit("before-delete")
	// Output: reached before-delete
}
