package checker

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/lockcheck/lockcheck/history"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	genClients = 8
	genTTLms   = 500
	genPauseMs = 600 // longer than the TTL, as pause-holder does
	us         = int64(1e3)
	cycleLen   = 2000 * us // one holder's turn
)

// generator streams a realistic fenced single-key history: eight clients
// take turns at acquire, read, write and release while three others fail to
// acquire; every pauseEvery turns the holder is paused after its read for
// longer than its TTL, and its write is refused when it wakes up.
type generator struct {
	events, resource *json.Encoder
	index, seq       int64
	rng              *rand.Rand
	now              int64
	value, fence     int64
	cycle            []history.Event

	paused   history.Process // -1 when nobody is
	pausedAt int64
	read     int64 // what the paused client read
	fenceOf  int64 // the paused client's fence
	pauses   int
}

func (g *generator) add(offset int64, p history.Process, typ history.Type, f string, v *history.Value) {
	key := lockKey
	if p == history.Nemesis {
		key = ""
	}
	g.cycle = append(g.cycle, history.Event{Time: g.now + offset, Process: p, Type: typ, F: f, Key: key, Value: v})
}

// flush writes the current turn's events in time order.
func (g *generator) flush() error {
	slices.SortStableFunc(g.cycle, func(a, b history.Event) int { return cmp.Compare(a.Time, b.Time) })
	for _, e := range g.cycle {
		e.Index = g.index
		g.index++
		if err := g.events.Encode(e); err != nil {
			return err
		}
	}
	g.cycle = g.cycle[:0]
	return nil
}

// others picks n clients other than the holder and the paused one.
func (g *generator) others(holder history.Process, n int) []history.Process {
	var ps []history.Process
	for _, i := range g.rng.Perm(genClients) {
		if p := history.Process(i); p != holder && p != g.paused && len(ps) < n {
			ps = append(ps, p)
		}
	}
	return ps
}

func (g *generator) failedAcquires(holder history.Process) {
	for i, p := range g.others(holder, 3) {
		inv := 100*us + int64(i)*400*us
		g.add(inv, p, history.Invoke, history.FAcquire, nil)
		g.add(inv+200*us, p, history.Fail, history.FAcquire, nil)
	}
}

func (g *generator) write(offset int64, p history.Process, read, fence int64, accepted bool) error {
	g.seq++
	req := fmt.Sprintf("c%d-%d", p, g.seq)
	g.add(offset, p, history.Invoke, history.FWrite,
		&history.Value{Value: history.Int64(read + 1), Read: history.Int64(read), Fence: history.Int64(fence), Req: req})
	g.add(offset+300*us, p, history.OK, history.FWrite,
		&history.Value{Accepted: history.Bool(accepted), Prev: history.Int64(g.value)})
	e := history.ResourceEntry{
		Seq: g.seq, Time: g.now + offset + 200*us, Key: lockKey, Process: p, Req: req,
		Fence: history.Int64(fence), Read: read, Value: read + 1, Prev: g.value, Accepted: accepted,
	}
	if accepted {
		g.value = read + 1
	} else {
		e.Reason = "stale fence"
	}
	return g.resource.Encode(e)
}

// turn writes one turn of about cycleLen, pausing its holder when pause.
func (g *generator) turn(pause bool) error {
	if g.paused >= 0 && g.now >= g.pausedAt+genPauseMs*1e6 {
		// The paused client wakes up, writes with its old fence, releases.
		p := g.paused
		g.add(0, history.Nemesis, history.Info, history.NemResume, &history.Value{Target: p.String()})
		if err := g.write(100*us, p, g.read, g.fenceOf, false); err != nil {
			return err
		}
		g.add(500*us, p, history.Invoke, history.FRelease, &history.Value{Token: p.String()})
		g.add(600*us, p, history.OK, history.FRelease, nil)
		g.paused = -1
		g.now += 1000 * us
	}
	if g.paused >= 0 && g.now < g.pausedAt+genTTLms*1e6 {
		// The paused client's lease is live: everyone else fails.
		g.failedAcquires(-1)
		g.now += cycleLen
		return g.flush()
	}
	holder := g.others(-1, 1)[0]
	g.fence++
	g.add(0, holder, history.Invoke, history.FAcquire, nil)
	g.add(300*us, holder, history.OK, history.FAcquire, &history.Value{
		Token: holder.String(), Fence: history.Int64(g.fence), TTLms: genTTLms, Deadline: g.now + genTTLms*1e6,
	})
	g.failedAcquires(holder)
	g.add(500*us, holder, history.Invoke, history.FRead, nil)
	g.add(700*us, holder, history.OK, history.FRead, &history.Value{Value: history.Int64(g.value)})
	if pause {
		g.add(800*us, history.Nemesis, history.Info, history.NemPause, &history.Value{Target: holder.String()})
		g.paused, g.pausedAt, g.read, g.fenceOf = holder, g.now+800*us, g.value, g.fence
		g.pauses++
	} else {
		if err := g.write(1000*us, holder, g.value, g.fence, true); err != nil {
			return err
		}
		g.add(1500*us, holder, history.Invoke, history.FRelease, &history.Value{Token: holder.String()})
		g.add(1700*us, holder, history.OK, history.FRelease, nil)
	}
	g.now += cycleLen
	return g.flush()
}

// generate writes a history of at least n events and its resource log into
// dir, with pauses evenly spread, and returns their paths and the pauses.
func generate(tb testing.TB, dir string, n, pauses int) (historyPath, resourcePath string, paused int) {
	tb.Helper()
	historyPath, resourcePath = filepath.Join(dir, "history.jsonl"), filepath.Join(dir, "resource.jsonl")
	hf, err := os.Create(historyPath)
	require.NoError(tb, err)
	rf, err := os.Create(resourcePath)
	require.NoError(tb, err)
	hw, rw := bufio.NewWriterSize(hf, 1<<20), bufio.NewWriterSize(rf, 1<<20)
	g := &generator{
		events: json.NewEncoder(hw), resource: json.NewEncoder(rw),
		rng: rand.New(rand.NewPCG(1, 2)), now: 1e12, paused: -1,
	}
	require.NoError(tb, g.events.Encode(history.Header{
		Version: history.SchemaVersion, StartTime: g.now,
		Config: history.RunConfig{
			Backend: "redis", Variant: "correct", Workload: "fenced", Nemesis: []string{"pause-holder"},
			Seed: 1, Clients: genClients, Keys: 1, TTLms: genTTLms,
		},
	}))
	pauseEvery := int64(n) / 14 / int64(pauses+1) // a turn is about 14 events
	for turn := int64(1); g.index < int64(n)-1; turn++ {
		require.NoError(tb, g.turn(turn%pauseEvery == 0 && g.paused < 0 && g.pauses < pauses))
	}
	g.add(0, history.Nemesis, history.Info, history.NemRunEnd, nil)
	require.NoError(tb, g.flush())
	require.NoError(tb, hw.Flush())
	require.NoError(tb, rw.Flush())
	require.NoError(tb, hf.Close())
	require.NoError(tb, rf.Close())
	return historyPath, resourcePath, g.pauses
}

func readAndCheck(tb testing.TB, historyPath, resourcePath string) *Result {
	h, err := history.ReadFile(historyPath)
	require.NoError(tb, err)
	log, err := history.ReadResourceLog(resourcePath)
	require.NoError(tb, err)
	return Check(h, log, Options{})
}

func TestGeneratedHistory(t *testing.T) {
	hp, rp, pauses := generate(t, t.TempDir(), 60_000, 3)
	require.Equal(t, 3, pauses)
	r := readAndCheck(t, hp, rp)
	c := r.Checks
	assert.Equal(t, Valid, r.Valid, r.Reason)
	assert.Equal(t, 0, c.LeaseSafety.Violations)
	assert.Equal(t, pauses, c.Resource.StaleWritesRefused)
	assert.Equal(t, pauses, c.DoubleOwnership.Windows, "each pause is one window, however many grants the paused holder overlaps")
	for _, w := range c.DoubleOwnership.List {
		assert.Greater(t, len(w.Processes), 2, "the paused holder and the clients granted the lock after its TTL")
	}
	assert.Equal(t, Linearizable, c.Linearizability.Result, c.Linearizability.Detail)
	assert.Greater(t, c.Linearizability.Segments, 1)
	assert.True(t, c.Fencing.Checked)
	assert.InDelta(t, genTTLms, c.Liveness.LongestStallMs, 5, "nobody gets the lock while the paused holder's lease lives")
}

func TestCheckFileEqualsCheck(t *testing.T) {
	hp, rp, _ := generate(t, t.TempDir(), 60_000, 3)
	log, err := history.ReadResourceLog(rp)
	require.NoError(t, err)
	streamed, err := CheckFile(hp, log, Options{})
	require.NoError(t, err)
	assert.Equal(t, readAndCheck(t, hp, rp), streamed)
}

// TestWriteBenchHistory writes a generated history of
// LOCKCHECK_BENCH_EVENTS events (10 pauses) and its resource log into
// LOCKCHECK_BENCH_DIR, for measuring checkers side by side in their own
// processes (peak RSS with /usr/bin/time -v); skipped unless both are set.
func TestWriteBenchHistory(t *testing.T) {
	dir, n := os.Getenv("LOCKCHECK_BENCH_DIR"), os.Getenv("LOCKCHECK_BENCH_EVENTS")
	if dir == "" || n == "" {
		t.Skip("set LOCKCHECK_BENCH_DIR and LOCKCHECK_BENCH_EVENTS")
	}
	events, err := strconv.Atoi(n)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	generate(t, dir, events, 10)
}

// benchmarkCheckFile streams and checks a generated history of n events.
func benchmarkCheckFile(b *testing.B, n int) {
	hp, rp, pauses := generate(b, b.TempDir(), n, 10)
	b.ResetTimer()
	for b.Loop() {
		log, err := history.ReadResourceLog(rp)
		require.NoError(b, err)
		r, err := CheckFile(hp, log, Options{})
		require.NoError(b, err)
		if r.Valid != Valid || r.Checks.Resource.StaleWritesRefused != pauses {
			b.Fatalf("verdict %s: %s", r.Valid, r.Reason)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkCheckFile1M and BenchmarkCheckFile10M check generated histories
// as `lockcheck check` does, streaming.
func BenchmarkCheckFile1M(b *testing.B)  { benchmarkCheckFile(b, 1_000_000) }
func BenchmarkCheckFile10M(b *testing.B) { benchmarkCheckFile(b, 10_000_000) }

// BenchmarkCheck1M reads and checks a million-event single-key history of
// eight clients with a few pauses, as `lockcheck check` would.
func BenchmarkCheck1M(b *testing.B) {
	hp, rp, pauses := generate(b, b.TempDir(), 1_000_000, 10)
	for b.Loop() {
		r := readAndCheck(b, hp, rp)
		if r.Valid != Valid || r.Checks.Resource.StaleWritesRefused != pauses {
			b.Fatalf("verdict %s: %s", r.Valid, r.Reason)
		}
	}
}
