package checktest

import (
	"fmt"

	"pgregory.net/rapid"

	"github.com/lockcheck/lockcheck/history"
)

// Random draws a small random history on one key for property tests: two to
// four clients acquire, re-acquire while holding, extend and release, with
// every outcome the model knows (ok, busy fail, refused or failed release,
// a release or extend that found nothing, info that retires the process),
// equal timestamps, a TTL or none, and single- or multi-node grants. With readsWrites the holders also
// read and write a counter.
//
// The lock service behind it is honest or not, as drawn: an honest one
// grants only a free lock (or one whose lease expired), so both valid and
// invalid histories come out.
func Random(t *rapid.T, readsWrites bool) *Builder {
	workload := rapid.SampledFrom([]string{"fenced", "unfenced"}).Draw(t, "workload")
	b := NewBuilder(workload)
	b.Config.TTLms = rapid.SampledFrom([]int64{0, 5, 20}).Draw(t, "ttl")
	g := &randomLock{t: t, b: b, honest: rapid.Bool().Draw(t, "honest"), ttl: b.Config.TTLms, holder: -1, rw: readsWrites}
	if rapid.IntRange(0, 3).Draw(t, "multi-node") == 0 {
		// A lock won on several nodes (Redlock): its grants name them.
		g.nodes = []string{"n1", "n2", "n3"}
	}
	clients := rapid.IntRange(2, 4).Draw(t, "clients")
	for p := range clients {
		g.procs = append(g.procs, &randomProc{p: history.Process(p)})
	}
	g.next = history.Process(clients)
	steps := rapid.IntRange(1, 14).Draw(t, "steps")
	for range steps {
		g.step()
	}
	return b
}

// randomLock is the lock service and the counter behind a random history.
type randomLock struct {
	t      *rapid.T
	b      *Builder
	honest bool
	rw     bool
	nodes  []string // of every grant of a multi-node lock
	ttl    int64    // ms; 0 is no TTL
	procs  []*randomProc
	next   history.Process // the number a retired client continues under
	now    float64

	holder   history.Process // -1 when free
	leaseEnd float64         // when the holder's lease runs out (ms)
	fence    int64
	value    int64
}

// randomProc is one client.
type randomProc struct {
	p      history.Process
	free   float64 // when its last operation completed
	holds  bool    // it believes it holds the lock
	read   *int64  // the value of its last read while holding
	fence  int64
	writes int
}

func (g *randomLock) step() {
	t := g.t
	c := g.procs[rapid.IntRange(0, len(g.procs)-1).Draw(t, "client")]
	// Operations of different clients overlap, and ones that start or end
	// at one instant are common.
	start := max(g.now, c.free) + float64(rapid.IntRange(0, 3).Draw(t, "gap"))
	end := start + float64(rapid.IntRange(0, 4).Draw(t, "length"))
	g.now = start
	c.free = end
	fs := []string{history.FAcquire, history.FAcquire, history.FRelease, history.FExtend}
	if g.rw && c.holds {
		fs = append(fs, history.FRead, history.FWrite, history.FWrite)
	}
	f := rapid.SampledFrom(fs).Draw(t, "f")
	outcome := rapid.SampledFrom([]history.Type{history.OK, history.OK, history.OK, history.Fail, history.Info}).Draw(t, "outcome")
	var inv, done *history.Value
	switch f {
	case history.FAcquire:
		expired := g.ttl > 0 && start >= g.leaseEnd
		if outcome == history.OK && g.honest && g.holder >= 0 && g.holder != c.p && !expired {
			outcome = history.Fail
		}
		if outcome == history.OK {
			g.fence++
			g.holder, c.holds, c.fence, c.read = c.p, true, g.fence, nil
			g.leaseEnd = start + float64(g.ttl)
			done = &history.Value{Token: c.p.String(), TTLms: g.ttl, Nodes: g.nodes}
			if g.b.Config.Fenced() {
				done.Fence = history.Int64(g.fence)
			}
		}
	case history.FRelease:
		inv = &history.Value{Token: c.p.String()}
		c.holds = false
		if outcome == history.OK {
			deleted := g.holder == c.p && rapid.IntRange(0, 4).Draw(t, "deleted") > 0
			if deleted {
				g.holder = -1
			}
			done = &history.Value{Accepted: history.Bool(deleted)}
		}
	case history.FExtend:
		inv = &history.Value{Token: c.p.String(), TTLms: g.ttl}
		if outcome == history.OK {
			ok := g.holder == c.p && rapid.Bool().Draw(t, "extended")
			if ok {
				g.leaseEnd = max(g.leaseEnd, start+float64(g.ttl))
			}
			done = &history.Value{Accepted: history.Bool(ok), TTLms: g.ttl}
		}
	case history.FRead:
		v := g.value
		if !g.honest && rapid.IntRange(0, 4).Draw(t, "stale") == 0 {
			v = max(0, v-1)
		}
		c.read = history.Int64(v)
		if outcome == history.OK {
			done = &history.Value{Value: history.Int64(v)}
		}
	case history.FWrite:
		read := g.value
		if c.read != nil {
			read = *c.read
		}
		c.writes++
		inv = &history.Value{Value: history.Int64(read + 1), Read: history.Int64(read), Req: fmt.Sprintf("%d-%d", c.p, c.writes)}
		if g.b.Config.Fenced() {
			inv.Fence = history.Int64(c.fence)
		}
		took := outcome == history.OK || (outcome == history.Info && rapid.Bool().Draw(t, "landed"))
		prev := g.value
		if took {
			g.value = read + 1
		}
		c.read = nil
		if outcome == history.OK {
			done = &history.Value{Accepted: history.Bool(true), Prev: history.Int64(prev)}
		}
	}
	g.b.Op(c.p, f, start, inv, end, outcome, done)
	if outcome == history.Info {
		// The client is retired and its worker goes on under a new number.
		c.p, c.holds, c.read = g.next, false, nil
		g.next++
	}
}
