package checker

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/lockcheck/lockcheck/checker/checktest"
	"github.com/lockcheck/lockcheck/history"
)

// checkSettlingAt checks h as Check does, settling a key once the scan
// holds n of its facts (0: never before the end); settled says a stretch
// was settled before the end and the history never went back past one.
func checkSettlingAt(t testing.TB, h *history.History, resource []history.ResourceEntry, n int) (r *Result, settled bool) {
	t.Helper()
	s := newScanner(h.Header, Options{}.withDefaults(), sliceSource(resource))
	s.settleAt = n
	for i := range h.Events {
		s.event(&h.Events[i])
	}
	settled = s.settledAny && !s.reordered
	r, err := s.conclude(h.Truncated)
	require.NoError(t, err)
	return r, settled
}

// withoutSettledFirsts blanks the earlier grant of fence duplicates: a
// duplicate of a fence settled in an earlier stretch names only its fence
// (the scan keeps no grant of a settled stretch).
func withoutSettledFirsts(r *Result) *Result {
	c := *r
	c.Checks.Fencing.Anomalies = nil
	for _, a := range r.Checks.Fencing.Anomalies {
		if a.Kind == FenceDuplicate {
			a.Earlier = Grant{Key: a.Earlier.Key, Fence: a.Earlier.Fence}
		}
		c.Checks.Fencing.Anomalies = append(c.Checks.Fencing.Anomalies, a)
	}
	return &c
}

// settleDifferential holds a scan that settles stretch after stretch to
// one that holds the whole history, on histories draw makes, settled as
// often as they can be (reading on past a point of rest for up to 5 ms of
// the history): the same verdict, counts, evidence and reasons.
func settleDifferential(t *testing.T, draw func(rt *rapid.T) *checktest.Builder) {
	manyChecks(t)
	slack := settleSlack
	t.Cleanup(func() { settleSlack = slack })
	var settled int
	defer func() { t.Logf("%d histories were settled before their end", settled) }()
	rapid.Check(t, func(rt *rapid.T) {
		b := draw(rt)
		h := b.Build(rt)
		settleSlack = int64(rapid.IntRange(0, 5).Draw(rt, "slack ms")) * 1e6
		whole, _ := checkSettlingAt(t, h, nil, 0)
		stretched, ok := checkSettlingAt(t, h, nil, rapid.IntRange(1, 6).Draw(rt, "settle at"))
		if !ok {
			return
		}
		settled++
		if want, got := withoutSettledFirsts(whole), withoutSettledFirsts(stretched); !reflect.DeepEqual(want, got) {
			rt.Fatalf("settled check differs:\nwant %+v\ngot  %+v\n%s", want, got, b.JSONL(rt))
		}
	})
	assert.Positive(t, settled)
}

func TestDifferentialSettle(t *testing.T) {
	settleDifferential(t, func(rt *rapid.T) *checktest.Builder {
		return checktest.Random(rt, rapid.Bool().Draw(rt, "reads and writes"))
	})
}

// otherClients numbers the second history's clients apart from the first's,
// whose retired clients continue under ever higher numbers.
const otherClients = 1000

// TestDifferentialSettleTwoKeys settles two random histories run side by
// side on two keys by distinct clients, key by key.
func TestDifferentialSettleTwoKeys(t *testing.T) {
	settleDifferential(t, func(rt *rapid.T) *checktest.Builder {
		rw := rapid.Bool().Draw(rt, "reads and writes")
		b := checktest.Random(rt, rw)
		for _, e := range checktest.Random(rt, rw).Events {
			if e.Process == history.Nemesis {
				if v := e.Value; v != nil && strings.HasPrefix(v.Target, "c") {
					c := *v
					n, _ := strconv.Atoi(v.Target[1:])
					c.Target = "c" + strconv.Itoa(n+otherClients)
					e.Value = &c
				}
			} else {
				e.Process += otherClients
				e.Key = "lock-1"
			}
			b.Events = append(b.Events, e)
		}
		return b
	})
}

// TestSettleGeneratedHistory settles a generated history with its resource
// log in many stretches and finds what the whole history shows.
func TestSettleGeneratedHistory(t *testing.T) {
	hp, rp, _ := generate(t, t.TempDir(), 60_000, 3)
	h, err := history.ReadFile(hp)
	require.NoError(t, err)
	log, err := history.ReadResourceLog(rp)
	require.NoError(t, err)
	whole, _ := checkSettlingAt(t, h, log, 0)
	for _, n := range []int{50, 4096} {
		stretched, settled := checkSettlingAt(t, h, log, n)
		assert.True(t, settled, "settle at %d", n)
		assert.Equal(t, whole, stretched, "settle at %d", n)
	}
	files, err := CheckFiles(hp, rp, Options{})
	require.NoError(t, err)
	assert.Equal(t, whole, files, "the resource log read as the scan goes")
}

// TestSettleGoneBack checks a history that goes back in time past a
// settled stretch again as a whole.
func TestSettleGoneBack(t *testing.T) {
	b := newBuilder("fenced")
	b.Acquire(0, 0, 1, 1).Release(0, 10, 11)
	b.Acquire(1, 20, 21, 2).Release(1, 30, 31)
	h := b.Build(t)
	// Client 2's failed acquire is recorded last but timed while c0 held
	// the lock, in the stretch settled at c1's grant.
	h.Events = append(h.Events,
		history.Event{Index: int64(len(h.Events)), Time: at(5), Process: 2, Type: history.Invoke, F: history.FAcquire, Key: lockKey},
		history.Event{Index: int64(len(h.Events) + 1), Time: at(25), Process: 2, Type: history.Fail, F: history.FAcquire, Key: lockKey})
	slack := settleSlack
	t.Cleanup(func() { settleSlack = slack })
	settleSlack = 0
	whole, _ := checkSettlingAt(t, h, nil, 0)
	_, settled := checkSettlingAt(t, h, nil, 2)
	assert.False(t, settled, "the late event is noticed")
	prev := settleAt
	t.Cleanup(func() { settleAt = prev })
	settleAt = 2
	assert.Equal(t, whole, Check(h, nil, Options{}), "Check scans it again without settling")
}

// The orphaned-lock rule settles like every other check: its claims, the
// faults that prolong them, and the refusals since the last one carry from
// stretch to stretch.
func TestDifferentialSettleOrphans(t *testing.T) {
	settleDifferential(t, checktest.RandomOrphan)
}
