package harness

import (
	"time"

	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads"
)

// Refused is what Run returns when the lock under test broke a rule the
// run cannot go on without (a grant that promises no lease): the run
// stopped there, as at its time limit, and its directory keeps what was
// recorded, whose run-end says why.
type Refused struct {
	Err error
	Dir string
}

func (r *Refused) Error() string { return r.Err.Error() }

func (r *Refused) Unwrap() error { return r.Err }

// checkLease refuses the run at a grant with no lease (workloads.LeaseError):
// of a Go lock, Grant.TTL 0 from a lock that does not declare its leases
// last until release; a grant bound to a server session (PostgreSQL's)
// says so itself.
func (f *fleet) checkLease(e *history.Event) {
	var ttl time.Duration
	session := false
	if e.Value != nil {
		ttl, session = time.Duration(e.Value.TTLms)*time.Millisecond, e.Value.Session != ""
	}
	field, declaration := "Grant.TTL", "lockcheck.Backend.LeasesUntilRelease"
	if f.base.Lock.Program != nil {
		// A lock client program says its lease in acquire_ok; whether a
		// grant lasts until release is its topology's (a session lock).
		field, declaration = "acquire_ok ttl_ms", "a topology whose locks live on sessions (postgres, mariadb)"
	}
	if err := workloads.LeaseError(e.Key, ttl, f.untilRelease || session, field, declaration); err != nil {
		f.refuse(err)
	}
}

// refuse stops the run at the first refusal; later ones are the same story.
func (f *fleet) refuse(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refusal != nil {
		return
	}
	f.refusal = &Refused{Err: err, Dir: f.rec.currentDir()}
	close(f.refused)
}

// refusalError is the run's refusal, or nil.
func (f *fleet) refusalError() *Refused {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refusal
}
