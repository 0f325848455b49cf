package main

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/lockcheck/lockcheck/locktest"
)

// Workers are this test binary started again: a pause stops the lock's
// own code.
func TestMain(m *testing.M) { locktest.Main(m) }

// The two scenarios of this directory, through go test: lockcheck starts a
// redis-server, runs three clients and holds c0 between its release's
// decision and its delete for longer than the TTL. Each test passes when
// the scenario's expectations are met: the GET-then-DEL release is caught
// deleting the next holder's key (lease safety fails), the Lua
// compare-and-delete release deletes nothing of it. The clients run as
// worker processes, which the hold stops with SIGSTOP, and as goroutines
// of the test, which it stalls at the failpoint.
func TestRedisLock(t *testing.T) {
	for _, tc := range []struct {
		scenario  string
		inProcess bool
		broken    bool
	}{
		{"get-del-race.yaml", false, true},
		{"lua-release.yaml", false, false},
		{"get-del-race.yaml", true, true},
		{"lua-release.yaml", true, false},
	} {
		name := tc.scenario
		if tc.inProcess {
			name += "/in-process"
		}
		t.Run(name, func(t *testing.T) {
			res := locktest.Run(t, open, locktest.Options{
				Topology: "redis", Failpoints: []string{beforeDelete}, Scenario: tc.scenario, InProcess: tc.inProcess,
			})
			assert.Equal(t, tc.broken, slices.Contains(res.Failed, "lease_safety"), "lease safety failed: %s", res.Reason)
		})
	}
}
