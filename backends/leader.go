package backends

import (
	"context"
	"time"

	"github.com/lockcheck/lockcheck/history"
)

// WatchLeader asks leader who leads every interval until ctx ends and
// records every change it sees as role events: the new leader with what
// marks its reign (a raft term, an epoch), and the node it replaced as a
// follower, so that the report shows who led when, whatever caused the
// election. A question that fails is asked again at the next interval.
func WatchLeader(ctx context.Context, interval time.Duration, leader func(context.Context) (name, reign string, err error), record func(verb string, v history.Value)) error {
	var led, reign string
	for {
		if name, r, err := leader(ctx); err == nil && (name != led || r != reign) {
			if led != "" && led != name {
				record(history.NemRole, history.Value{Target: led, Detail: "follower"})
			}
			record(history.NemRole, history.Value{Target: name, Detail: "leader (" + r + ")"})
			led, reign = name, r
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}
