package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/nemesis"
	"github.com/lockcheck/lockcheck/results"
	"github.com/lockcheck/lockcheck/workloads"
)

// nextSegment ends segment n at a point where nothing crosses into the
// next (Config.Segment): every client finishes its cycle and waits before
// its next acquire (within grace, or is killed and replaced), the leases
// they held run out (the granted lease is waited out), the clocks are put
// back, the lock keys are inspected, and the next segment's run
// directory, history (its header carrying what the segment leaves,
// history.SegmentHead) and resource log are created. Only then does the segment's history end and
// the recording move to the new files. It returns the new run directory
// and what lets the waiting clients go on, which its caller calls once it
// has handed the closed segment on. On an error (ctx ended, or a file
// could not be written) the clients stay parked and the run should end:
// finish lets them go, and the history being recorded (the recorder's)
// gets the run's end.
func (r *run) nextSegment(ctx context.Context, n int) (string, func(), error) {
	resume, err := r.fleet.hold(ctx, r.cfg.grace())
	if err != nil {
		return "", nil, err
	}
	// A lease a client still held when it stopped (a release that failed
	// or timed out, a client killed in its release) ends within the lease
	// the backend granted of its last renewal, which came before the
	// client parked or died: its last acquire or extend, or a session's
	// keepalive. The granted lease, not the TTL asked for: etcd grants 1s
	// for 500ms, a library may take its own (the longest a grant or extend
	// reported); its latest end allows a tenth of it, and 10ms, for the
	// service's expiry ticks on a busy machine.
	parked := history.Now()
	lease := max(r.cfg.Lease, time.Duration(r.rec.longestLease.Load())*time.Millisecond)
	_, ends := history.LeaseEnds(parked, parked, lease, lease/10+10*time.Millisecond)
	select {
	case <-ctx.Done():
		return "", nil, ctx.Err()
	case <-time.After(time.Duration(ends - history.Now())):
	}
	resetClocks(r.top.servers)
	r.inspect()

	dir := r.rec.currentDir()
	next, err := results.NewRunDir(r.cfg.Out, r.cfg.Run.Backend, r.cfg.Run.Workload, time.Now())
	if err != nil {
		r.rec.failed("the next segment's run directory", err)
		return "", nil, err
	}
	// failed gives the next segment up: the run ends in this one.
	failed := func(file string, err error) (string, func(), error) {
		r.rec.failed(file, err)
		os.RemoveAll(next)
		return "", nil, err
	}
	var (
		resLog   io.WriteCloser
		resHeads []history.KeyHead
	)
	switch {
	case r.memory != nil:
		if resLog, err = r.cfg.createLog(filepath.Join(next, results.ResourceFile)); err != nil {
			return failed(results.ResourceFile, err)
		}
		resHeads = r.memory.Heads()
	case r.db != nil:
		exportCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		resHeads, err = r.db.export(exportCtx, r.cfg.createLog, filepath.Join(dir, results.ResourceFile))
		cancel()
		if err != nil {
			return failed(results.ResourceFile, err)
		}
	}
	h, err := createHistory(r.cfg, next, r.cfg.segmentLimit(n+1), r.rec.head(n+1, resHeads))
	if err != nil {
		if resLog != nil {
			resLog.Close()
		}
		return failed(results.HistoryFile, err)
	}
	// Every file of the next segment is in place: the segment ends.
	r.rec.nemesis(history.NemRunEnd, history.Value{Detail: history.RunEndSegment})
	if r.memory != nil {
		if err := r.memory.Rotate(resLog); err != nil {
			h.Close()
			return failed(results.ResourceFile, err)
		}
	}
	if err := r.rec.rotate(h, next).Close(); err != nil {
		// The recording goes on in the next segment's files, but this
		// segment's history is not whole: the run ends.
		r.rec.failed(results.HistoryFile, err)
		return "", nil, err
	}
	return next, resume, nil
}

// hold parks every client before its next acquire, the cycle in progress
// finished, and returns what lets them all go on. A client that does not
// get there within grace is killed, as at the end of a run; a replacement
// started while the fleet holds (for it, or for a client that died
// meanwhile) starts parked (workerproc.Config.Held). On an error the
// clients stay as they are, and the run should end (stop lets them go).
func (f *fleet) hold(ctx context.Context, grace time.Duration) (func(), error) {
	f.mu.Lock()
	f.holding = true
	f.mu.Unlock()
	type parked struct {
		resume func()
		err    error
	}
	done := make(chan parked, f.cfg.Run.Clients)
	for slot := range f.cfg.Run.Clients {
		go func() {
			resume, err := f.park(ctx, slot, grace)
			done <- parked{resume, err}
		}()
	}
	var resumes []func()
	var errs []error
	for range f.cfg.Run.Clients {
		p := <-done
		if p.resume != nil {
			resumes = append(resumes, p.resume)
		}
		errs = append(errs, p.err)
	}
	resume := func() {
		f.mu.Lock()
		f.holding = false
		workers := append([]*worker(nil), f.slots...)
		f.mu.Unlock()
		for _, r := range resumes {
			r()
		}
		// A replacement started after its slot was parked waits too.
		for _, w := range workers {
			if w != nil {
				w.letGo()
			}
		}
	}
	return resume, errors.Join(errs...)
}

// park parks the client of slot before its next acquire.
func (f *fleet) park(ctx context.Context, slot int, grace time.Duration) (func(), error) {
	killed := false
	for {
		w := f.slot(slot)
		pctx, cancel := context.WithTimeout(ctx, grace)
		resume, err := w.ParkAt(pctx, workloads.FailpointBeforeAcquire)
		cancel()
		switch {
		case err == nil:
			return resume, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, nemesis.ErrMissed):
			// It exited: its replacement is on its way.
		case killed:
			return nil, fmt.Errorf("client slot %d did not finish its cycle within %s, twice", slot, grace)
		default:
			f.log.Warn("a client did not finish its cycle in time; killing it", "client", w.Name(), "grace", grace)
			w.Signal(syscall.SIGKILL) //nolint:errcheck // gone already is fine
			killed = true
		}
		if err := f.awaitReplacement(ctx, slot, w, grace); err != nil {
			return nil, err
		}
	}
}

// awaitReplacement waits until the worker of slot is no longer w.
func (f *fleet) awaitReplacement(ctx context.Context, slot int, w *worker, grace time.Duration) error {
	deadline := time.Now().Add(grace)
	for f.slot(slot) == w {
		if time.Now().After(deadline) {
			return fmt.Errorf("client slot %d was not restarted within %s", slot, grace)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}
