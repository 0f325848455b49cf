package checker

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/lockcheck/lockcheck/history"
)

// An acquire the client refused itself, sending nothing (a program's error
// 41: not connected), is counted apart from the service's refusals: it got
// no answer from the service, and a key nobody holds is not orphaned by
// acquires that never reached it. The same acquires refused as busy
// orphan the key.
func TestNotSentAcquiresAreCountedApart(t *testing.T) {
	tests := []struct {
		name                         string
		notSent                      bool
		failed, notSentN, orphaned   int
		unansweredWithNoFaultInForce int
	}{
		{name: "not sent by the client", notSent: true, notSentN: 4, unansweredWithNoFaultInForce: 4},
		{name: "refused as busy", failed: 4, orphaned: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder("unfenced").Acquire(0, 0, 1, 1).Release(0, 10, 11)
			for i := range 4 {
				at := 100 + 1000*float64(i)
				b.AcquireFail(1, at, at+1)
				if tt.notSent {
					e := &b.Events[len(b.Events)-1]
					e.Value, e.Error = &history.Value{NotSent: true}, "client c1: acquire: error 41 (definite: it did not take effect): not connected to ZooKeeper"
				}
			}
			r := check(t, b)
			l := r.Checks.Liveness
			assert.Equal(t, tt.failed, l.AcquireFailed, "refused as busy")
			assert.Zero(t, l.AcquireRefused, "the service refused nothing")
			assert.Equal(t, tt.notSentN, l.AcquireNotSent)
			assert.Equal(t, tt.orphaned, l.Orphaned)
			assert.Equal(t, tt.unansweredWithNoFaultInForce, l.AcquireNoFaultUnanswered)
			if tt.notSent {
				assert.Contains(t, l.AcquireErrors[0].Error, "not connected")
			}
		})
	}
}
