package checker

import (
	"testing"

	"github.com/lockcheck/lockcheck/checker/checktest"
)

// The hand-written histories of these tests come from checktest.
type builder = checktest.Builder

const (
	t0      = checktest.T0
	lockKey = checktest.LockKey
)

var (
	at         = checktest.At
	newBuilder = checktest.NewBuilder
)

// check builds and checks the history with no resource log.
func check(t testing.TB, b *builder) *Result {
	t.Helper()
	return Check(b.Build(t), nil, Options{})
}
