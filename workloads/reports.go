package workloads

import (
	"sync"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/history"
)

// reports records what a lock's library did on its own
// (backends.Reporter): a renewal is an extend that succeeded, so the lease
// is judged by what the library really did, and a pause shows as renewals
// that stopped; a lost lock is a lock-lost event, whose time against the
// next grant says how late the library told the application (its grant's
// Lost channel, closed by the lock, is what ends the loop's belief). An
// extend is a client operation of the holder's process, so one that comes
// while the process has another operation in flight waits for it to
// complete.
type reports struct {
	mu       sync.Mutex
	inFlight bool
	queued   []backends.Report
	// key and token are the grant the process holds now ("" none).
	key, token string
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
			r.key, r.token = e.Key, e.Value.Token
		}
		if e.Type == history.Info {
			r.key, r.token = "", ""
		}
	}
	r.last = max(r.last, e.Time)
	c.emit(e)
	if !r.inFlight {
		queued := r.queued
		r.queued = nil
		for _, q := range queued {
			c.recordReport(q)
		}
	}
}

// report is the lock's backends.Reporter function.
func (c *Client) report(rep backends.Report) {
	r := &c.reports
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inFlight && !rep.Lost {
		r.queued = append(r.queued, rep)
		return
	}
	c.recordReport(rep)
}

// recordReport writes one report; c.reports.mu is held.
func (c *Client) recordReport(rep backends.Report) {
	r := &c.reports
	t := max(history.Now()-int64(time.Since(rep.At)), r.last)
	if rep.Lost {
		// Not an operation of the process: an observation, at once.
		c.emit(history.Event{Time: t, Process: history.Nemesis, Type: history.Info, F: history.NemLockLost, Key: rep.Key,
			Value: &history.Value{Target: c.process.String(), Token: rep.Token, Detail: rep.Why}})
		return
	}
	if rep.Key != r.key || rep.Token != r.token {
		return // a renewal of a grant the process no longer holds extends nothing it believes in
	}
	ttl := rep.TTL.Milliseconds()
	c.emit(history.Event{Time: t, Process: c.process, Type: history.Invoke, F: history.FExtend, Key: rep.Key,
		Value: &history.Value{Token: rep.Token, TTLms: ttl, Detail: RenewedByLibrary}})
	c.emit(history.Event{Time: t, Process: c.process, Type: history.OK, F: history.FExtend, Key: rep.Key,
		Value: &history.Value{Accepted: history.Bool(true), TTLms: ttl}})
	r.last = t
}

// RenewedByLibrary is the detail of an extend invoke that records a
// renewal the lock's library made on its own (a lock client's renewed
// message), not one the client loop asked for.
const RenewedByLibrary = "renewed by the library"
