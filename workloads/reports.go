package workloads

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/history"
)

// reports records what a lock's library did on its own
// (backends.Reporter). A renewal is an extend of the holder's process only
// when its invoke can be placed no later than the renewal really began:
// at the time the library sent it (Report.Sent), with nothing of the
// process recorded after that. The checker takes a lease as certainly live
// from an extend's invoke for its TTL, so an invoke placed when the
// renewal was read (after a pause of the holder, or after the operation in
// flight) would make it live longer than the service granted. Any other
// renewal is a lock-renewed observation, which moves no lease: the history
// still shows renewals, and that they stopped during a pause. A lost lock
// is a lock-lost event, whose time against the next grant says how late
// the library told the application (its grant's Lost channel, closed by
// the lock, is what ends the loop's belief).
type reports struct {
	mu       sync.Mutex
	inFlight bool
	// key and token are the grant the process holds now ("" none),
	// granted when it was.
	key, token string
	granted    int64
	last       int64 // the time of the process's latest event
}

// emit records e, serialised with every other event of the client.
func (c *Client) emitEvent(e history.Event) {
	r := &c.reports
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case e.Type == history.Invoke:
		r.inFlight = true
		if e.F == history.FRelease {
			r.key, r.token = "", ""
		}
	default:
		r.inFlight = false
		if e.Type == history.OK && e.F == history.FAcquire && e.Value != nil {
			r.key, r.token, r.granted = e.Key, e.Value.Token, e.Time
		}
		if e.Type == history.Info {
			r.key, r.token = "", ""
		}
	}
	r.last = max(r.last, e.Time)
	c.emit(e)
}

// report is the lock's backends.Reporter function.
func (c *Client) report(rep backends.Report) {
	r := &c.reports
	r.mu.Lock()
	defer r.mu.Unlock()
	now := history.Now()
	read := max(now-int64(time.Since(rep.At)), r.last)
	if rep.Rule != "" {
		c.emit(history.Event{Time: read, Process: history.Nemesis, Type: history.Info, F: history.NemClientViolation,
			Value: &history.Value{Target: c.process.String(), Rule: rep.Rule, Detail: rep.Why}})
		return
	}
	if rep.Lost {
		// Not an operation of the process: an observation, at once.
		c.emit(history.Event{Time: read, Process: history.Nemesis, Type: history.Info, F: history.NemLockLost, Key: rep.Key,
			Value: &history.Value{Target: c.process.String(), Token: rep.Token, Detail: rep.Why}})
		return
	}
	if rep.Key != r.key || rep.Token != r.token {
		return // a renewal of a grant the process no longer holds extends nothing it believes in
	}
	ttl := rep.TTL.Milliseconds()
	if why := r.unplaced(rep, now); why != "" {
		if rep.Sent != 0 && rep.Sent <= read {
			why += fmt.Sprintf(", sent %.1f ms before it was read", float64(read-rep.Sent)/1e6)
		}
		c.emit(history.Event{Time: read, Process: history.Nemesis, Type: history.Info, F: history.NemLockRenewed, Key: rep.Key,
			Value: &history.Value{Target: c.process.String(), Token: rep.Token, TTLms: ttl, Detail: why}})
		return
	}
	done := max(read, rep.Sent)
	c.emit(history.Event{Time: rep.Sent, Process: c.process, Type: history.Invoke, F: history.FExtend, Key: rep.Key,
		Value: &history.Value{Token: rep.Token, TTLms: ttl, Detail: RenewedByLibrary}})
	c.emit(history.Event{Time: done, Process: c.process, Type: history.OK, F: history.FExtend, Key: rep.Key,
		Value: &history.Value{Accepted: history.Bool(true), TTLms: ttl}})
	r.last = done
}

// unplaced says why a renewal cannot be an extend of the process, whose
// invoke must come at the renewal's start, after the process's latest
// event, with no operation of the process in flight; "" when it can.
func (r *reports) unplaced(rep backends.Report, now int64) string {
	switch {
	case rep.Sent == 0:
		return "renewed by the library, when sent unknown (no sent_ns)"
	case rep.Sent < r.granted:
		return "renewed by the library, sent_ns before the grant it renews (not CLOCK_MONOTONIC)"
	case r.inFlight || rep.Sent < r.last:
		return "renewed by the library during another operation of the process"
	case rep.Sent > now:
		return "renewed by the library, sent_ns in the future (not CLOCK_MONOTONIC)"
	}
	return ""
}

// RenewedByLibrary is the detail of an extend invoke that records a
// renewal the lock's library made on its own (a lock client's renewed
// message), not one the client loop asked for.
const RenewedByLibrary = "renewed by the library"

// startLock starts a lock whose client must run before a request can be
// sent (backends.Starter), and records a restart as one: the acquire's
// invoke comes after it. A start that fails is left to the acquire, which
// fails the same way and is recorded as its outcome.
func (c *Client) startLock(ctx context.Context) {
	s, ok := c.lock.(backends.Starter)
	if !ok {
		return
	}
	took, err := s.Start(ctx)
	if err != nil || took == 0 {
		return
	}
	c.emit(history.Event{Time: history.Now(), Process: history.Nemesis, Type: history.Info, F: history.NemClientStart,
		Value: &history.Value{Target: c.process.String(), DurationMs: took.Milliseconds(),
			Detail: fmt.Sprintf("its lock client program was started again in %s", took.Round(time.Millisecond))}})
}
