package workloads

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads/resource"
)

// memLock is a lock in this process: one holder per key, a fence that rises
// with every grant. It stands for a backend so that the client loop can be
// tested on its own.
type memLock struct {
	mu      sync.Mutex
	holders map[string]string
	fence   int64
	refuse  bool // every acquire is refused, as when another client holds it
}

func (l *memLock) Acquire(_ context.Context, key string) (backends.Grant, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse || l.holders[key] != "" {
		return backends.Grant{}, backends.ErrNotAcquired
	}
	l.fence++
	token := strconv.FormatInt(l.fence, 10)
	l.holders[key] = token
	return backends.Grant{Token: token, Fence: history.Int64(l.fence), TTL: time.Second}, nil
}

func (l *memLock) Extend(context.Context, string, backends.Grant) (bool, error) { return true, nil }

func (l *memLock) Release(_ context.Context, key string, g backends.Grant) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holders[key] != g.Token {
		return false, nil
	}
	delete(l.holders, key)
	return true, nil
}

func (l *memLock) Inspect(context.Context, string) (string, error) { return "", nil }
func (l *memLock) Close() error                                    { return nil }

// brokenWrites is a resource whose writes never answer.
type brokenWrites struct{ resource.Resource }

func (brokenWrites) Write(context.Context, resource.WriteRequest) (resource.WriteReply, error) {
	return resource.WriteReply{}, errors.New("connection reset")
}

// op is an event reduced to what the client loop decides.
type op struct {
	process history.Process
	typ     history.Type
	f       string
}

// Each cycle of the client loop, against the in-process resource: what it
// records, what the resource logged, and how a failure ends the process.
func TestClientCycle(t *testing.T) {
	tests := []struct {
		name    string
		refuse  bool
		broken  bool
		want    []op
		logged  int   // writes the resource logged
		value   int64 // the counter afterwards
		process history.Process
	}{
		{
			name: "a grant reads, writes read+1 with its fence and releases",
			want: []op{
				{0, history.Invoke, history.FAcquire}, {0, history.OK, history.FAcquire},
				{0, history.Invoke, history.FRead}, {0, history.OK, history.FRead},
				{0, history.Invoke, history.FWrite}, {0, history.OK, history.FWrite},
				{0, history.Invoke, history.FRelease}, {0, history.OK, history.FRelease},
			},
			logged: 1, value: 1, process: 0,
		},
		{
			name:   "a refused acquire is a fail and touches nothing",
			refuse: true,
			want:   []op{{0, history.Invoke, history.FAcquire}, {0, history.Fail, history.FAcquire}},
			logged: 0, value: 0, process: 0,
		},
		{
			name:   "a write with an unknown outcome retires the process",
			broken: true,
			want: []op{
				{0, history.Invoke, history.FAcquire}, {0, history.OK, history.FAcquire},
				{0, history.Invoke, history.FRead}, {0, history.OK, history.FRead},
				{0, history.Invoke, history.FWrite}, {0, history.Info, history.FWrite},
			},
			logged: 0, value: 0, process: 5,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			store := resource.NewStore(&log, false)
			var res resource.Resource = store
			if tt.broken {
				res = brokenWrites{store}
			}
			var got []op
			var events []history.Event
			c := NewClient(Config{Keys: []string{"lock-0"}, Stride: 5}, &memLock{holders: map[string]string{}, refuse: tt.refuse}, res,
				func(e history.Event) { got = append(got, op{e.Process, e.Type, e.F}); events = append(events, e) }, nil)
			c.cycle("lock-0")
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.process, c.Process())
			assert.Equal(t, tt.logged, bytes.Count(log.Bytes(), []byte("\n")), "writes logged by the resource")
			r, err := store.Read(context.Background(), resource.ReadRequest{Key: "lock-0"})
			require.NoError(t, err)
			assert.Equal(t, tt.value, r.Value)
			require.NoError(t, store.Err())
			for _, e := range events {
				if e.F == history.FWrite && e.Type == history.Invoke {
					require.NotNil(t, e.Value.Fence, "the write carries the grant's fence")
					assert.Equal(t, int64(1), *e.Value.Fence)
				}
			}
		})
	}
}

// The fenced in-memory resource refuses a write whose fence is not above
// the highest written, and logs the refusal.
func TestFencedStoreRefusesAStaleFence(t *testing.T) {
	var log bytes.Buffer
	store := resource.NewStore(&log, true)
	ctx := context.Background()
	for _, w := range []struct {
		fence    int64
		accepted bool
	}{{2, true}, {1, false}, {2, false}, {3, true}} {
		reply, err := store.Write(ctx, resource.WriteRequest{Key: "k", Fence: history.Int64(w.fence), Value: w.fence})
		require.NoError(t, err)
		assert.Equal(t, w.accepted, reply.Accepted, "fence %d", w.fence)
	}
	var entries []history.ResourceEntry
	dec := json.NewDecoder(&log)
	for dec.More() {
		var e history.ResourceEntry
		require.NoError(t, dec.Decode(&e))
		entries = append(entries, e)
	}
	require.Len(t, entries, 4, "every write is logged, accepted or refused")
	assert.NotEmpty(t, entries[1].Reason)
}

// restartingLock is a memLock whose client, like a lock client program
// killed after a timeout, takes a while to start again before it can
// take a request (backends.Starter).
type restartingLock struct {
	memLock
	down bool
	took time.Duration
}

func (l *restartingLock) Start(context.Context) (time.Duration, error) {
	if !l.down {
		return 0, nil
	}
	time.Sleep(l.took)
	l.down = false
	return l.took, nil
}

// A restart is not a wait for the lock: a client whose program must start
// again records the start, then the acquire's invoke; the acquire's
// latency holds none of the restart, and a client that was running records
// no start.
func TestARestartIsNotAcquireLatency(t *testing.T) {
	for _, down := range []bool{true, false} {
		t.Run(strconv.FormatBool(down), func(t *testing.T) {
			lock := &restartingLock{memLock: memLock{holders: map[string]string{}}, down: down, took: 200 * time.Millisecond}
			var events []history.Event
			c := NewClient(Config{Keys: []string{"lock-0"}, Stride: 5}, lock, resource.NewStore(&bytes.Buffer{}, false),
				func(e history.Event) { events = append(events, e) }, nil)
			c.cycle("lock-0")
			require.NotEmpty(t, events)
			if !down {
				assert.Equal(t, history.FAcquire, events[0].F, "no start recorded for a running client")
				return
			}
			start := events[0]
			require.Equal(t, history.NemClientStart, start.F)
			assert.Equal(t, "c0", start.Value.Target)
			assert.Equal(t, int64(200), start.Value.DurationMs)
			require.Equal(t, history.FAcquire, events[1].F)
			require.Equal(t, history.FAcquire, events[2].F)
			assert.GreaterOrEqual(t, events[1].Time, start.Time, "the invoke comes after the restart")
			assert.Less(t, events[2].Time-events[1].Time, int64(100*time.Millisecond), "the acquire's latency holds none of the 200ms restart")
		})
	}
}
