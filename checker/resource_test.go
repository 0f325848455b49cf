package checker

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/history"
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

// TestResourceLogMustBeWhole: a resource log that holds fewer accepted
// writes than the history shows accepted, or whose last line is cut off,
// cannot vouch for the writes it lacks: the resource check is unknown,
// never a pass, and names the counts. What the log does hold is still
// judged, and entries the history does not show accepted are as before.
func TestResourceLogMustBeWhole(t *testing.T) {
	// Four turns of two clients, each writing the value it read.
	b := newBuilder("fenced")
	var whole []history.ResourceEntry
	for i := range 4 {
		ms, req := float64(10*i), string(rune('a'+i))
		b.Cycle(history.Process(i%2), ms, int64(i), int64(i+1), req)
		e := entry(int64(i+1), history.Process(i%2), req, int64(i+1), int64(i), int64(i+1), int64(i), true)
		e.Time = at(ms + 4)
		whole = append(whole, e)
	}
	// A fifth write that timed out at its client, though it landed.
	b.Acquire(0, 50, 51, 5).Write(0, 52, 56, 5, 4, 5, "e", history.Info, false, 0)
	landed := entry(5, 0, "e", 5, 4, 5, 4, true)
	landed.Time = at(54)
	lost := slices.Clone(whole[:3])
	lost[2].Prev = 7 // c0's third write replaced a value it never read
	tests := []struct {
		name   string
		log    *history.ResourceLog
		valid  Validity
		reason string // in the resource check's reason; "" for none
	}{
		{"a whole log passes", &history.ResourceLog{Entries: whole}, Valid, ""},
		{"a log that holds a write the history never saw accepted passes", &history.ResourceLog{Entries: append(slices.Clone(whole), landed)}, Valid, ""},
		{"a log missing its last entries is unknown", &history.ResourceLog{Entries: whole[:2]},
			Unknown, "the resource log holds 2 accepted writes; the history accepted 4: 2 are missing from the log and cannot be judged; check the run's whole resource.jsonl"},
		{"a log missing an entry in the middle is unknown", &history.ResourceLog{Entries: []history.ResourceEntry{whole[0], whole[1], whole[3]}},
			Unknown, "the resource log holds 3 accepted writes; the history accepted 4: 1 is missing"},
		{"an empty log is unknown", &history.ResourceLog{Entries: []history.ResourceEntry{}},
			Unknown, "the resource log holds 0 accepted writes; the history accepted 4"},
		{"a log whose last line is cut off is unknown", &history.ResourceLog{Entries: whole[:3], Truncated: true},
			Unknown, "the resource log's last line is cut off (it holds 3 accepted writes; the history accepted 4): the writes after it are not in the log"},
		{"a cut log is unknown even when it holds every write the history shows", &history.ResourceLog{Entries: whole, Truncated: true},
			Unknown, "the resource log's last line is cut off (it holds 4 accepted writes; the history accepted 4)"},
		{"a lost update in what a cut log holds is still false", &history.ResourceLog{Entries: lost, Truncated: true}, Invalid, "the resource log's last line is cut off"},
	}
	h := b.Build(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// In memory and streamed from the files, alike.
			dir := t.TempDir()
			historyPath, resourcePath := filepath.Join(dir, "history.jsonl"), filepath.Join(dir, "resource.jsonl")
			require.NoError(t, os.WriteFile(historyPath, b.JSONL(t), 0o644))
			var log bytes.Buffer
			for _, e := range tt.log.Entries {
				require.NoError(t, json.NewEncoder(&log).Encode(e))
			}
			if tt.log.Truncated {
				log.WriteString(`{"seq":99,"time":`)
			}
			require.NoError(t, os.WriteFile(resourcePath, log.Bytes(), 0o644))
			streamed, err := CheckFiles(historyPath, resourcePath, Options{})
			require.NoError(t, err)
			for name, r := range map[string]*Result{"in memory": CheckLog(h, tt.log, Options{}), "streamed": streamed} {
				res := r.Checks.Resource
				assert.Equal(t, tt.valid, r.Valid, "%s: %s", name, r.Reason)
				if tt.reason == "" {
					assert.Empty(t, res.State, name)
					continue
				}
				assert.Equal(t, StateUnknown, res.State, name)
				assert.Contains(t, res.StateReason, tt.reason, name)
				if tt.valid == Unknown {
					assert.Contains(t, r.Reason, tt.reason, "%s: the verdict's reason says why", name)
				}
			}
		})
	}
}
