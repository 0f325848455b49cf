package results

import (
	"fmt"
	"time"

	"github.com/lockcheck/lockcheck/history"
)

// LeaseLine says when the leases the grants reported (acquire's ttl_ms)
// are not the lease the run expected for its --ttl: a library that asks
// for its own (python-etcd3's 60 s) is judged by the lease it was granted,
// and a reader comparing pauses with --ttl must know it. "" when every
// grant reported the expected lease, or none reported one.
func LeaseLine(h *history.History) string {
	cfg := h.Header.Config
	want := cfg.LeaseMs
	if want <= 0 {
		want = cfg.TTLms
	}
	var low, high int64
	for _, e := range h.Events {
		if e.Type != history.OK || e.F != history.FAcquire || e.Value == nil || e.Value.TTLms <= 0 {
			continue
		}
		if low == 0 || e.Value.TTLms < low {
			low = e.Value.TTLms
		}
		high = max(high, e.Value.TTLms)
	}
	if high == 0 || (low == want && high == want) {
		return ""
	}
	granted := millis(low).String()
	if low != high {
		granted = millis(low).String() + " to " + millis(high).String()
	}
	line := fmt.Sprintf("leases granted: %s, not the %s --ttl asked", granted, millis(cfg.TTLms))
	if cfg.LeaseMs > 0 && cfg.LeaseMs != cfg.TTLms {
		line = fmt.Sprintf("leases granted: %s, not the %s expected for --ttl %s", granted, millis(cfg.LeaseMs), millis(cfg.TTLms))
	}
	return line + "; faults were judged by the lease granted"
}

func millis(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
