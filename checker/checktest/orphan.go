package checktest

import (
	"fmt"

	"pgregory.net/rapid"

	"github.com/lockcheck/lockcheck/history"
)

// RandomOrphan draws a random history on one key, seconds long, whose lock
// service may orphan the key: a client killed between taking the key and
// giving it a TTL (SETNX then EXPIRE) leaves it held by nobody, and so does
// a release the service answers with "nothing to free" while it keeps the
// key (an advisory lock left on a pooled server connection). Otherwise the
// service is honest: it refuses a key only while a client holds it, or
// while the lease of one that died runs out. Clients are also killed and
// retired while they hold the key or ask for it, releases fail or get no
// answer, and the nemesis pauses a node or a client, so both orphaned and
// healthy keys come out, with and without a TTL (0, 40 or 150 ms).
func RandomOrphan(t *rapid.T) *Builder {
	b := NewBuilder("unfenced")
	b.Config.TTLms = rapid.SampledFrom([]int64{0, 40, 150}).Draw(t, "ttl")
	g := &orphanLock{t: t, b: b, ttl: float64(b.Config.TTLms), holder: -1, leaky: rapid.Bool().Draw(t, "leaky")}
	clients := rapid.IntRange(2, 4).Draw(t, "clients")
	for p := range clients {
		g.procs = append(g.procs, &orphanProc{p: history.Process(p)})
	}
	g.next = history.Process(clients)
	steps := rapid.IntRange(5, 120).Draw(t, "steps")
	for range steps {
		g.step()
	}
	for _, c := range g.procs {
		if c.paused {
			b.Nemesis(g.now+1, history.NemResume, c.p.String(), "", "")
		}
	}
	if g.nodePaused {
		b.Nemesis(g.now+1, history.NemResume, "n1", "", "")
	}
	if rapid.Bool().Draw(t, "run-end") {
		b.Nemesis(g.now+5, history.NemRunEnd, "", "", "")
	}
	return b
}

// orphanLock is the lock service behind a RandomOrphan history.
type orphanLock struct {
	t     *rapid.T
	b     *Builder
	ttl   float64 // ms; 0 is none: a lease lasts until released
	procs []*orphanProc
	next  history.Process
	now   float64

	holder history.Process // -1 when free
	expiry float64         // when the holder's lease runs out, with a TTL
	// ghost is set once nobody can ever take the key again; a leaky
	// service orphans the key whenever it can, another one now and then.
	ghost      bool
	leaky      bool
	nodePaused bool
}

type orphanProc struct {
	p      history.Process
	free   float64 // when its last operation completed
	holds  bool
	paused bool
}

// taken says whether the key is held for someone other than p at t.
func (g *orphanLock) taken(p history.Process, t float64) bool {
	if g.ghost {
		return true
	}
	if g.holder < 0 || g.holder == p {
		return false
	}
	return g.ttl == 0 || t < g.expiry
}

func (g *orphanLock) grant(p history.Process, t float64) {
	g.holder, g.expiry = p, t+g.ttl
}

// retire continues c under a new process number, as a worker does after
// an unknown outcome or a kill; a pause of the old one heals first.
func (g *orphanLock) retire(c *orphanProc) {
	if c.paused {
		g.b.Nemesis(g.now, history.NemResume, c.p.String(), "", "")
		c.paused = false
	}
	c.p, c.holds = g.next, false
	g.next++
}

func (g *orphanLock) step() {
	t := g.t
	c := g.procs[rapid.IntRange(0, len(g.procs)-1).Draw(t, "client")]
	start := max(g.now, c.free) + float64(rapid.SampledFrom([]int{0, 1, 3, 10, 60, 200, 400}).Draw(t, "gap"))
	g.now = start
	if c.paused {
		// A stopped client does nothing: the nemesis may resume it, or
		// kill it, or leave it stopped a while longer.
		switch rapid.IntRange(0, 2).Draw(t, "paused client") {
		case 0:
			g.b.Nemesis(start, history.NemResume, c.p.String(), "", "")
			c.paused = false
		case 1:
			g.kill(c, start)
		}
		return
	}
	switch rapid.IntRange(0, 19).Draw(t, "action") {
	case 0:
		g.nemesisPause(c, start)
		return
	case 1:
		g.kill(c, start)
		return
	}
	length := float64(rapid.SampledFrom([]int{0, 1, 2, 4, 300}).Draw(t, "length"))
	end := start + length
	c.free = end
	ttl := int64(g.ttl)
	switch {
	case !c.holds || rapid.IntRange(0, 2).Draw(t, "hold on") == 0:
		g.acquire(c, start, end, ttl)
	case g.ttl > 0 && rapid.IntRange(0, 3).Draw(t, "extend") == 0:
		inv := &history.Value{Token: c.p.String(), TTLms: ttl}
		outcome := rapid.SampledFrom([]history.Type{history.OK, history.OK, history.Info}).Draw(t, "extend outcome")
		ok := outcome == history.OK && g.holder == c.p && !g.ghost && start < g.expiry
		if ok {
			g.expiry = max(g.expiry, start+g.ttl)
		}
		var done *history.Value
		if outcome == history.OK {
			done = &history.Value{Accepted: history.Bool(ok), TTLms: ttl}
		}
		g.b.Op(c.p, history.FExtend, start, inv, end, outcome, done)
		if outcome == history.Info {
			g.retire(c)
		}
	default:
		g.release(c, start, end)
	}
}

func (g *orphanLock) acquire(c *orphanProc, start, end float64, ttl int64) {
	t := g.t
	inv := &history.Value{TTLms: ttl}
	if rapid.IntRange(0, 3).Draw(t, "killed while acquiring") == 0 {
		// Killed with the acquire in flight: the service may have taken
		// the key for it, and without a TTL if the client died between
		// SETNX and EXPIRE.
		g.b.Add(start, c.p, history.Invoke, history.FAcquire, inv)
		if !g.taken(c.p, start) {
			switch rapid.IntRange(0, 2).Draw(t, "took effect") {
			case 0:
				g.ghost = true
			case 1:
				g.grant(c.p, start)
				g.ghost = g.leaky
			}
		}
		g.b.Nemesis(start+(end-start)/2, history.NemKill, c.p.String(), "", "")
		g.retire(c)
		return
	}
	var outcome history.Type
	switch {
	case rapid.IntRange(0, 9).Draw(t, "unknown") == 0:
		outcome = history.Info
	case g.taken(c.p, start):
		outcome = history.Fail
	default:
		outcome = history.OK
	}
	var done *history.Value
	switch outcome {
	case history.OK:
		g.grant(c.p, start)
		c.holds = true
		done = &history.Value{Token: c.p.String(), TTLms: ttl}
	case history.Fail:
		// Now and then the service would not write at all (NOREPLICAS):
		// no busy refusal.
		if rapid.IntRange(0, 9).Draw(t, "refused") == 0 {
			done = &history.Value{Refused: true}
		}
	case history.Info:
		if !g.taken(c.p, start) && rapid.Bool().Draw(t, "info took effect") {
			g.grant(c.p, start)
		}
	}
	g.b.Op(c.p, history.FAcquire, start, inv, end, outcome, done)
	if outcome == history.Info {
		g.retire(c)
	}
}

func (g *orphanLock) release(c *orphanProc, start, end float64) {
	t := g.t
	inv := &history.Value{Token: c.p.String()}
	c.holds = false
	mine := g.holder == c.p && !g.ghost
	switch rapid.IntRange(0, 9).Draw(t, "release outcome") {
	case 0:
		// Failed: the service still holds the key for the client.
		g.b.Op(c.p, history.FRelease, start, inv, end, history.Fail, nil)
	case 1:
		if mine && rapid.Bool().Draw(t, "release took effect") {
			g.holder = -1
		}
		g.b.Op(c.p, history.FRelease, start, inv, end, history.Info, nil)
		g.retire(c)
	case 2:
		// The service answers that it freed nothing, and keeps the key
		// on the connection the client no longer has.
		if mine {
			g.ghost = g.leaky || rapid.Bool().Draw(t, "kept on another connection")
			g.holder = -1
		}
		g.b.Op(c.p, history.FRelease, start, inv, end, history.OK, &history.Value{Accepted: history.Bool(false)})
	default:
		if mine {
			g.holder = -1
		}
		g.b.Op(c.p, history.FRelease, start, inv, end, history.OK, &history.Value{Accepted: history.Bool(mine)})
	}
}

// kill kills c between operations: a lease it held runs out (with a TTL),
// or ends with its session (without one), unless the service keeps it.
func (g *orphanLock) kill(c *orphanProc, at float64) {
	if g.holder == c.p && g.ttl == 0 && !g.ghost {
		g.holder = -1
		g.ghost = rapid.IntRange(0, 3).Draw(g.t, "session survives") == 0
	}
	g.b.Nemesis(at, history.NemKill, c.p.String(), "", "")
	c.paused = false // a kill ends a pause
	g.retire(c)
	c.free = at
}

// nemesisPause pauses or resumes the node, or pauses client c.
func (g *orphanLock) nemesisPause(c *orphanProc, at float64) {
	if rapid.Bool().Draw(g.t, "pause the node") {
		verb := history.NemPause
		if g.nodePaused {
			verb = history.NemResume
		}
		g.nodePaused = !g.nodePaused
		g.b.Add(at, history.Nemesis, history.Info, verb, &history.Value{Target: "n1", DurationMs: 100})
		return
	}
	c.paused = true // step resumes it
	if g.holder == c.p && g.ttl > 0 && !g.ghost && rapid.IntRange(0, 2).Draw(g.t, "keeps the paused holder's key") == 0 {
		// A service that keeps a stopped holder's lease past its TTL
		// orphans the key: its holder believes on, but renews nothing.
		g.ghost = true
	}
	g.b.Add(at, history.Nemesis, history.Info, history.NemPause, &history.Value{Target: c.p.String(), Detail: fmt.Sprintf("slot of %s", c.p)})
}
