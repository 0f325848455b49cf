package harness

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/results"
)

// recorder writes the run's history. Every event, a client's or the
// nemesis's, goes through it into the history of the segment being
// recorded, and it keeps what the events say that a segment hands on
// (each key's highest granted fence) or progress shows (grants, refusals,
// faults). The first write of the history or the resource log that fails
// latches it: the run stops as at its time limit.
type recorder struct {
	// mu orders appends with a segment boundary's swap of hist and dir,
	// and guards the latch.
	mu   sync.Mutex
	hist *history.Writer
	// dir is the run directory being recorded (a segment's, in a
	// segmented run).
	dir    string
	fences map[string]int64

	grants   atomic.Int64
	refusals atomic.Int64 // acquires the service would not write at all
	faults   atomic.Int64
	// failover is when the latest switch-master was recorded
	// (nemesis.Failovers), whoever reported it: the watcher of the
	// service, or a fault that promoted a standby.
	failover atomic.Int64
	// longestLease is the longest lease a grant or an extend reported
	// (ttl_ms, in ms): a soak's boundary waits it out.
	longestLease atomic.Int64

	// stopped is closed at the first failed write, err says which.
	stopped chan struct{}
	err     error
}

func newRecorder(h *history.Writer, dir string) *recorder {
	return &recorder{hist: h, dir: dir, fences: map[string]int64{}, stopped: make(chan struct{})}
}

// createHistory creates the history of the run directory dir, its
// header recording a time limit of limit and, for a later segment of a
// segmented run, what it carries over (head).
func createHistory(cfg Config, dir string, limit time.Duration, head *history.SegmentHead) (*history.Writer, error) {
	histLog, err := cfg.createLog(filepath.Join(dir, results.HistoryFile))
	if err != nil {
		return nil, err
	}
	h, err := history.NewWriter(histLog, history.Header{
		Started: time.Now().UTC().Format(time.RFC3339), StartTime: history.Now(), Config: cfg.record(limit), Head: head,
	})
	if err != nil {
		histLog.Close()
		return nil, fmt.Errorf("recording %s failed: %w", results.HistoryFile, err)
	}
	return h, nil
}

// append records an event; a write that fails stops the run.
func (r *recorder) append(e history.Event) {
	switch {
	case e.Type == history.OK && e.F == history.FAcquire:
		r.grants.Add(1)
	case e.Type == history.Fail && e.F == history.FAcquire && e.Value != nil && e.Value.Refused:
		r.refusals.Add(1)
	}
	if e.Type == history.OK && (e.F == history.FAcquire || e.F == history.FExtend) && e.Value != nil {
		for ms := e.Value.TTLms; ms > r.longestLease.Load(); {
			if r.longestLease.CompareAndSwap(r.longestLease.Load(), ms) {
				break
			}
		}
	}
	r.mu.Lock()
	_, err := r.hist.Append(e)
	if e.Type == history.OK && e.F == history.FAcquire && e.Value != nil && e.Value.Fence != nil {
		if high, ok := r.fences[e.Key]; !ok || *e.Value.Fence > high {
			r.fences[e.Key] = *e.Value.Fence
		}
	}
	r.mu.Unlock()
	if err != nil {
		r.failed(results.HistoryFile, err)
	}
}

// nemesis records a nemesis event (nemesis.Env.Record).
func (r *recorder) nemesis(verb string, v history.Value) {
	if history.VerbOf(verb).Role == history.Starts {
		r.faults.Add(1)
	}
	now := history.Now()
	if verb == history.NemSwitchMaster {
		r.failover.Store(now)
	}
	r.append(history.Event{Time: now, Process: history.Nemesis, Type: history.Info, F: verb, Value: &v})
}

// failed stops the run at the first failed write of file. Every later
// write fails too (the history writer and the resource refuse all once one
// failed), and only the first is reported: by the caller of Run, in one
// line.
func (r *recorder) failed(file string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	r.err = fmt.Errorf("recording %s failed: %w", file, err)
	close(r.stopped)
}

// failure is the first failed write, if any.
func (r *recorder) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// currentDir is the run directory being recorded.
func (r *recorder) currentDir() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dir
}

// head is what segment n starts from: each key's highest granted fence so
// far and the resource's value and highest written fence (resHeads, from
// the resource), in key order.
func (r *recorder) head(n int, resHeads []history.KeyHead) *history.SegmentHead {
	byKey := map[string]*history.KeyHead{}
	for i := range resHeads {
		byKey[resHeads[i].Key] = &resHeads[i]
	}
	r.mu.Lock()
	for key, fence := range r.fences {
		h := byKey[key]
		if h == nil {
			h = &history.KeyHead{Key: key}
			byKey[key] = h
		}
		h.Fence = history.Int64(fence)
	}
	r.mu.Unlock()
	head := &history.SegmentHead{Segment: n, Keys: []history.KeyHead{}}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		head.Keys = append(head.Keys, *byKey[key])
	}
	return head
}

// rotate moves the recording to the history h of the run directory dir,
// and returns the one recorded so far, for its caller to close.
func (r *recorder) rotate(h *history.Writer, dir string) *history.Writer {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.hist
	r.hist, r.dir = h, dir
	return old
}

// close closes the history being recorded.
func (r *recorder) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hist.Close()
}
