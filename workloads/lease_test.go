package workloads

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A grant promises a lease, or comes from a lock that holds it until it is
// released; anything else is refused, naming where the lock says its TTL.
func TestLeaseError(t *testing.T) {
	assert.NoError(t, LeaseError("lock-0", 500*time.Millisecond, false, "Grant.TTL", "Backend.LeasesUntilRelease"))
	assert.NoError(t, LeaseError("lock-0", 0, true, "Grant.TTL", "Backend.LeasesUntilRelease"))
	err := LeaseError("lock-0", 0, false, "ttl_ms", "the handshake's leases_until_release")
	assert.EqualError(t, err, "the lock granted lock-0 with no lease: ttl_ms is 0s, so no client can tell how long it holds the lock and every write would be skipped; "+
		"set ttl_ms to the lease the service promises, or declare the handshake's leases_until_release if the lock holds a grant until it is released (a session lock)")
}
