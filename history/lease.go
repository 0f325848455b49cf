package history

import "time"

// LeaseEnds is the one home of lease arithmetic: when a lease of ttl, asked
// for at invoke and granted (or renewed) by ok, on this history's clock
// (CLOCK_MONOTONIC ns), can end. earliest is the soonest it may have
// expired: the service may have started it as soon as it was asked, and
// its clock may run fast by allowance. latest is the last moment it can
// still be live: started no later than ok, on a clock slow by allowance.
// The checker judges a grant against earliest (with ClockAllowance), the
// nemesis aims within it, the report draws it, the client loop checks its
// own deadline against it (with its own margin), and a soak's boundary
// waits out latest.
func LeaseEnds(invoke, ok int64, ttl, allowance time.Duration) (earliest, latest int64) {
	return invoke + int64(ttl-allowance), ok + int64(ttl+allowance)
}

// ClockAllowance is how much earlier than its TTL the checker takes a
// lease to have possibly ended, 2ms plus a thousandth of the TTL: Redis
// keeps expiry in whole milliseconds and wall clocks are slewed, and only
// certain violations are reported.
func ClockAllowance(ttl time.Duration) time.Duration { return 2*time.Millisecond + ttl/1000 }
