package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/results"
)

// onlinePoll is the pause between two online checks. A check of the
// history so far plus this pause is how late --stop-on-anomaly may be.
const onlinePoll = 200 * time.Millisecond

// onlineCheck follows a run as it is recorded: a checker.Follower reads
// the lines added to the history and resource log since its last look (a
// line cut mid-write waits), carrying the scan, and settles the lock keys
// as they come to rest; the onlineCheck keeps the anomalies found so far
// by check for the progress line, and closes stop at the first anomaly
// when asked to.
//
// The run's final verdict is the ordinary check of the whole directory,
// so it equals lockcheck check of it; the online check only decides when
// to stop and what to show.
type onlineCheck struct {
	opts          checker.Options
	fenced        bool
	stopOnAnomaly bool
	stop          chan struct{}
	done          chan struct{}

	mu        sync.Mutex
	dir       string
	anomalies []checker.CheckAnomalies
	stopped   bool
}

func newOnlineCheck(opts checker.Options, fenced, stopOnAnomaly bool) *onlineCheck {
	// An online check must come round again soon: its search for a
	// linearization gets a second in all; the final check has the full
	// linearizability timeout.
	opts.LinearizabilityTimeout = min(opts.LinearizabilityTimeout, time.Second)
	return &onlineCheck{opts: opts, fenced: fenced, stopOnAnomaly: stopOnAnomaly, stop: make(chan struct{}), done: make(chan struct{})}
}

// follow checks the run directory the progress reports name until close.
func (o *onlineCheck) follow() {
	var (
		f         *checker.Follower
		following string // the run directory f follows
	)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for {
		select {
		case <-o.done:
			return
		case <-time.After(onlinePoll):
		}
		o.mu.Lock()
		dir := o.dir
		o.mu.Unlock()
		if dir == "" {
			continue
		}
		if f != nil && dir != following {
			// A soak's next segment: its history starts afresh.
			f.Close()
			f = nil
			o.mu.Lock()
			o.anomalies = nil
			o.mu.Unlock()
		}
		if f == nil {
			var err error
			f, err = checker.NewFollower(filepath.Join(dir, results.HistoryFile), filepath.Join(dir, results.ResourceFile), o.opts)
			if err != nil {
				f = nil
				continue // not created yet
			}
			following = dir
		}
		if err := f.Read(); err != nil {
			continue // a history being written that the model refuses is reported by the final check
		}
		found := f.Anomalies(o.fenced)
		o.mu.Lock()
		o.anomalies = found
		o.mu.Unlock()
		if len(found) > 0 {
			o.found()
		}
	}
}

// found stops the run at an anomaly, when asked to: one the online check
// found, or a soak's check of a closed segment.
func (o *onlineCheck) found() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopOnAnomaly && !o.stopped {
		o.stopped = true
		close(o.stop)
	}
}

// stoppedRun reports whether an anomaly stopped the run.
func (o *onlineCheck) stoppedRun() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stopped
}

// close ends follow.
func (o *onlineCheck) close() { close(o.done) }

// progress wraps a progress reporter: it learns the run directory from the
// progress and adds the anomalies found so far to the line.
func (o *onlineCheck) progress(report func(harness.Progress, string)) func(harness.Progress) {
	return func(p harness.Progress) {
		o.mu.Lock()
		o.dir = p.Dir
		found := o.anomalies
		o.mu.Unlock()
		report(p, anomalyLine(found))
	}
}

// anomalyLine names the anomalies found so far by check:
// "anomalies: lease_safety 2, resource 1", or "anomalies 0".
func anomalyLine(found []checker.CheckAnomalies) string {
	if len(found) == 0 {
		return "anomalies 0"
	}
	parts := make([]string, len(found))
	for i, a := range found {
		parts[i] = fmt.Sprintf("%s %d", a.Key, a.Count)
	}
	return "anomalies: " + strings.Join(parts, ", ")
}
