package checker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker/checktest"
	"github.com/lockcheck/lockcheck/history"
)

// A later segment of a soak carries each key's highest fence and the
// resource's highest written fence over from the segments before it
// (history.SegmentHead): a grant or an accepted write below them is an
// anomaly the segment alone would not show.
func TestSegmentHeadCarriesFences(t *testing.T) {
	head := func(fence, written int64) *history.SegmentHead {
		return &history.SegmentHead{Segment: 2, Keys: []history.KeyHead{{
			Key: lockKey, Fence: history.Int64(fence), Value: history.Int64(40), WrittenFence: history.Int64(written),
		}}}
	}
	tests := []struct {
		name                    string
		head                    *history.SegmentHead
		b                       *builder
		duplicates, regressions int
		staleAccepted           int
		reason                  string
	}{
		{
			name: "fences rise past the head",
			head: head(10, 10),
			b:    newBuilder("fenced").Cycle(0, 0, 40, 11, "a").Cycle(1, 20, 41, 12, "b"),
		},
		{
			name:        "a grant below the head's fence went back",
			head:        head(10, 10),
			b:           newBuilder("fenced").Cycle(0, 0, 40, 5, "a"),
			regressions: 1, staleAccepted: 1, reason: "an earlier segment of the soak had handed out fence 10",
		},
		{
			name:       "the head's fence handed out again",
			head:       head(10, 10),
			b:          newBuilder("fenced").Cycle(0, 0, 40, 10, "a"),
			duplicates: 1, reason: "an earlier segment of the soak had handed out fence 10",
		},
		{
			name: "without a head the same segment shows nothing",
			b:    newBuilder("fenced").Cycle(0, 0, 40, 5, "a"),
		},
		{
			name:          "a write accepted below the head's written fence is stale",
			head:          head(3, 10),
			b:             newBuilder("fenced").Acquire(0, 0, 1, 7).Write(0, 2, 3, 41, 40, 7, "a", history.OK, true, 40).Release(0, 4, 5),
			staleAccepted: 1,
		},
		{
			name: "the same write with no head is fine",
			b:    newBuilder("fenced").Acquire(0, 0, 1, 7).Write(0, 2, 3, 41, 40, 7, "a", history.OK, true, 40).Release(0, 4, 5),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.b.Head = tt.head
			r := check(t, tt.b)
			f := r.Checks.Fencing
			assert.Equal(t, tt.duplicates, f.Duplicates, "duplicates")
			assert.Equal(t, tt.regressions, f.Regressions, "regressions")
			assert.Equal(t, tt.staleAccepted, r.Checks.Resource.StaleWritesAccepted, "stale writes accepted")
			if tt.reason != "" {
				assert.Contains(t, r.Reason, tt.reason)
			}
			if tt.duplicates+tt.regressions+tt.staleAccepted > 0 {
				assert.Equal(t, Invalid, r.Valid)
			}
		})
	}
}

// The head is read from the file: a segment's history round-trips it.
func TestSegmentHeadIsReadFromTheHeader(t *testing.T) {
	b := newBuilder("fenced").Cycle(0, 0, 0, 1, "a")
	b.Head = &history.SegmentHead{Segment: 3, Keys: []history.KeyHead{{Key: checktest.LockKey, Fence: history.Int64(9)}}}
	h := b.Build(t)
	require.NotNil(t, h.Header.Head)
	assert.Equal(t, 3, h.Header.Head.Segment)
	assert.Equal(t, int64(9), *h.Header.Head.Keys[0].Fence)
}
