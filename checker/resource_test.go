package checker

import (
	"testing"

	"github.com/lockcheck/lockcheck/history"
	"github.com/stretchr/testify/assert"
)

// entry is a resource log line: req's write of value computed from read,
// over prev, with fence (< 0: none).
func entry(seq int64, p history.Process, req string, fence, read, value, prev int64, accepted bool) history.ResourceEntry {
	e := history.ResourceEntry{
		Seq: seq, Time: at(float64(seq)), Key: lockKey, Process: p, Req: req,
		Read: read, Value: value, Prev: prev, Accepted: accepted,
	}
	if fence >= 0 {
		e.Fence = history.Int64(fence)
	}
	if !accepted {
		e.Reason = "stale fence"
	}
	return e
}

func TestResourceSafety(t *testing.T) {
	tests := []struct {
		name    string
		log     []history.ResourceEntry
		lost    int
		stale   int
		refused int
		kinds   []string
	}{
		{
			name: "every write read what it replaced and fences rose",
			log: []history.ResourceEntry{
				entry(1, 0, "a", 1, 0, 1, 0, true),
				entry(2, 1, "b", 2, 1, 2, 1, true),
				entry(3, 2, "c", 3, 2, 3, 2, true),
			},
		},
		{
			name: "a write over a value its client never read is a lost update",
			log: []history.ResourceEntry{
				entry(1, 1, "b", 2, 0, 1, 0, true),
				entry(2, 0, "a", 3, 0, 1, 1, true),
			},
			lost:  1,
			kinds: []string{LostUpdate},
		},
		{
			name: "a lower fence accepted after a higher one is a stale write",
			log: []history.ResourceEntry{
				entry(1, 1, "b", 5, 0, 1, 0, true),
				entry(2, 0, "a", 4, 1, 2, 1, true),
			},
			stale: 1,
			kinds: []string{StaleWriteAccepted},
		},
		{
			name: "a refused stale write is fencing at work",
			log: []history.ResourceEntry{
				entry(1, 1, "b", 5, 0, 1, 0, true),
				entry(2, 0, "a", 4, 0, 1, 1, false),
				entry(3, 2, "c", 6, 1, 2, 1, true),
			},
			refused: 1,
			kinds:   []string{StaleWriteRefused},
		},
		{
			name: "the log is judged in seq order",
			log: []history.ResourceEntry{
				entry(2, 0, "a", 4, 1, 2, 1, true),
				entry(1, 1, "b", 5, 0, 1, 0, true),
			},
			stale: 1,
			kinds: []string{StaleWriteAccepted},
		},
		{
			name: "keys are judged apart",
			log: func() []history.ResourceEntry {
				other := entry(2, 0, "a", 1, 0, 1, 0, true)
				other.Key = "lock-1"
				return []history.ResourceEntry{entry(1, 1, "b", 5, 0, 1, 0, true), other}
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checkResource(tt.log, SourceResourceLog)
			assert.Equal(t, tt.lost, r.LostUpdates)
			assert.Equal(t, tt.stale, r.StaleWritesAccepted)
			assert.Equal(t, tt.refused, r.StaleWritesRefused)
			assert.Equal(t, tt.lost == 0 && tt.stale == 0, r.Valid)
			var kinds []string
			for _, a := range r.Anomalies {
				kinds = append(kinds, a.Kind)
			}
			assert.Equal(t, tt.kinds, kinds)
		})
	}
}

func TestResourceSource(t *testing.T) {
	t.Run("from the history when there is no log", func(t *testing.T) {
		r := check(t, pausedHolder("unfenced"))
		res := r.Checks.Resource
		assert.Equal(t, SourceHistory, res.Source)
		assert.Equal(t, 1, res.LostUpdates)
		assert.False(t, res.Valid)
		assert.Equal(t, Invalid, r.Valid)
		assert.Equal(t, 1, res.StaleWritesAccepted, "the unfenced client still sent its fence as evidence")
		assert.Equal(t, "c0 believed it held lock-0 through a 295 ms pause; the service had let its lease go by 0.10s, and c1 was granted it: two clients believed they held it for 9 ms, "+
			"and the resource accepted 1 write of theirs without fencing; c0's write with fence 1 overwrote a value it had not read (lost update).", r.Reason)
	})
	t.Run("refused stale write from the history", func(t *testing.T) {
		r := check(t, pausedHolder("fenced"))
		res := r.Checks.Resource
		assert.Equal(t, 1, res.StaleWritesRefused)
		assert.True(t, res.Valid)
		assert.Equal(t, Valid, r.Valid, r.Reason)
	})
	t.Run("the resource log wins over what the client saw", func(t *testing.T) {
		h := pausedHolder("fenced").Build(t)
		log := []history.ResourceEntry{
			entry(1, 1, "r2", 2, 0, 1, 0, true),
			entry(2, 0, "r1", 1, 0, 1, 1, true),
		}
		r := Check(h, log, Options{})
		res := r.Checks.Resource
		assert.Equal(t, SourceResourceLog, res.Source)
		assert.Equal(t, 1, res.LostUpdates)
		assert.Equal(t, 1, res.StaleWritesAccepted)
		assert.Equal(t, Invalid, r.Valid)
	})
}
