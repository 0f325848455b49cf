package workloads

import (
	"fmt"
	"time"
)

// LeaseError is the refusal of a grant of key that promises no lease: its
// TTL is not positive and the lock does not declare that it holds a grant
// until it is released (untilRelease: a session lock). A client could not
// tell for how long it holds such a lock: the counter loop would find its
// lease over before every write, skip them all, and the run would end
// having tested nothing. field names where the lock says its TTL
// (Grant.TTL for a Go lock), declaration how it says its leases last until
// release. It is nil for a grant with a lease.
func LeaseError(key string, ttl time.Duration, untilRelease bool, field, declaration string) error {
	if ttl > 0 || untilRelease {
		return nil
	}
	return fmt.Errorf("the lock granted %s with no lease: %s is %s, so no client can tell how long it holds the lock and every write would be skipped; set %s to the lease the service promises, or declare %s if the lock holds a grant until it is released (a session lock)",
		key, field, ttl, field, declaration)
}
