package locktest_test

import (
	"testing"

	"github.com/lockcheck/lockcheck"
	"github.com/lockcheck/lockcheck/locktest"
)

// openMyLock stands for your lock's Open function.
func openMyLock(c lockcheck.Config) (lockcheck.Lock, error) { return newLeases().open(c) }

// A test of your lock: lockcheck starts a redis-server, runs three worker
// processes of the test binary (it needs TestMain to call locktest.Main),
// kills clients while they hold the lock and fails the test if the checker
// finds it broken. openMyLock is your lockcheck.Backend Open function.
func ExampleRun() {
	// func TestMain(m *testing.M) { locktest.Main(m) }
	testMyLock := func(t *testing.T) {
		locktest.Run(t, openMyLock, locktest.Options{
			Topology: "redis",
			Nemesis:  []string{"kill-client"},
		})
	}
	_ = testMyLock
}
