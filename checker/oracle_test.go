package checker

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/lockcheck/lockcheck/history"
)

// This file is the independent oracle of the differential test: the lease
// and belief rules of docs/history.md applied per process with no shared
// incremental state, lease safety as a brute-force search over all pairs of
// grants, double ownership by counting believers on every elementary
// stretch of time, and porcupine with a lease-mutex model. It is slow on
// purpose and must stay obviously right; it knows no nemesis kill (the
// generator draws none).

// oracleGrant is one grant with the two ends the model gives it.
type oracleGrant struct {
	process        history.Process
	key            string
	invoke, ok     int64
	index          int64
	certainEnd     int64
	beliefEnd      int64
	expiry         int64
	believed       bool
	multiNode      bool  // won on several nodes
	releaseInvoked int64 // of a pending release; 0 when none
	// chain are the earlier grants of the same lease that this re-entrant
	// grant continued, latest first; next is the invoke of the grant that
	// continued this one, capped says its expiry may have come before.
	chain     []*oracleGrant
	next      int64
	capped    bool
	continued bool
}

const forever = int64(math.MaxInt64)

// oracleGrants applies the model to each process's own events in turn.
func oracleGrants(h *history.History, allowance func(int64) int64) []*oracleGrant {
	end := int64(math.MinInt64)
	for _, e := range h.Events {
		end = max(end, e.Time)
	}
	expiry := func(invoke, ttlMs int64) int64 {
		if ttlMs <= 0 {
			return forever
		}
		return invoke + ttlMs*1e6 - allowance(ttlMs)
	}
	byProcess := map[history.Process][]history.Event{}
	for _, e := range h.Events {
		if e.Process != history.Nemesis {
			byProcess[e.Process] = append(byProcess[e.Process], e)
		}
	}
	var all []*oracleGrant
	for p, events := range byProcess {
		held := map[string]*oracleGrant{}
		var releasing *oracleGrant
		for i := 0; i < len(events); i += 2 {
			inv := events[i]
			var done *history.Event
			if i+1 < len(events) {
				done = &events[i+1]
			}
			g := held[inv.Key]
			switch inv.F {
			case history.FAcquire:
				if done == nil || done.Type != history.OK {
					break
				}
				var chain []*oracleGrant
				if g != nil {
					if g.believed {
						g.beliefEnd = done.Time
					}
					g.capped, g.next, g.continued = g.expiry < done.Time, inv.Time, true
					chain = append([]*oracleGrant{g}, g.chain...)
				}
				ttl := h.Header.Config.TTLms
				if done.Value != nil && done.Value.TTLms > 0 {
					ttl = done.Value.TTLms
				}
				n := &oracleGrant{process: p, key: inv.Key, invoke: inv.Time, ok: done.Time, index: done.Index, expiry: expiry(inv.Time, ttl), believed: true, chain: chain}
				n.multiNode = done.Value != nil && len(done.Value.Nodes) > 0
				held[inv.Key] = n
				all = append(all, n)
			case history.FExtend:
				if g != nil && done != nil && done.Type == history.OK && (done.Value == nil || done.Value.Accepted == nil || *done.Value.Accepted) {
					ttl := g.expiry // unchanged unless a TTL is given
					if done.Value != nil && done.Value.TTLms > 0 {
						ttl = expiry(inv.Time, done.Value.TTLms)
					}
					g.expiry = max(g.expiry, ttl)
				}
			case history.FRelease:
				if g == nil {
					break
				}
				if g.believed {
					g.beliefEnd, g.believed = inv.Time, false
				}
				switch {
				case done == nil:
					releasing, g.releaseInvoked = g, inv.Time
					delete(held, inv.Key)
				case done.Type == history.Fail, done.Type == history.OK && done.Value != nil && done.Value.Accepted != nil && !*done.Value.Accepted && !g.multiNode:
					// Still held until it expires or a later release.
				default:
					g.certainEnd = min(g.expiry, inv.Time)
					delete(held, inv.Key)
				}
			}
			if done == nil || done.Type == history.Info {
				at := end
				if done != nil {
					at = done.Time
				}
				for k, g := range held {
					if g.believed {
						g.beliefEnd = at
					}
					g.certainEnd = g.expiry
					delete(held, k)
				}
				break
			}
		}
		if releasing != nil {
			releasing.certainEnd = min(releasing.expiry, releasing.releaseInvoked)
		}
		for _, g := range held {
			if g.believed {
				g.beliefEnd = end
			}
			g.certainEnd = g.expiry
		}
	}
	// The fast checker's grants end no later than just after the history;
	// "forever" and that are the same for every comparison below.
	for _, g := range all {
		g.certainEnd = min(g.certainEnd, end+1)
	}
	// An earlier grant of a continued lease lasts until the grant that
	// continued it took effect and then as long as that one.
	for _, g := range all {
		if g.continued {
			continue
		}
		later := g.certainEnd
		for _, c := range g.chain {
			later = max(c.next, later)
			if c.capped {
				later = min(c.expiry, later)
			}
			c.certainEnd = later
		}
	}
	slices.SortFunc(all, func(a, b *oracleGrant) int {
		return cmp.Or(cmp.Compare(a.ok, b.ok), cmp.Compare(a.invoke, b.invoke), cmp.Compare(a.index, b.index))
	})
	return all
}

// oracleLeaseViolations counts the grants B for which some earlier grant A of
// another process on the same key was certainly live: B got it before A's
// lease can have ended, and either B asked after A was granted (strictly:
// equal times prove no order) or A was granted before B's own lease can
// have ended.
func oracleLeaseViolations(grants []*oracleGrant) int {
	n := 0
	for i, b := range grants {
		for _, a := range grants[:i] {
			if a.process == b.process || a.key != b.key {
				continue
			}
			if b.ok < a.certainEnd && (b.invoke > a.ok || a.ok < b.certainEnd) {
				n++
				break
			}
		}
	}
	return n
}

// oracleWindows counts double-ownership windows and their total length in
// ns. Between consecutive edges, a process believes when its interval
// covers the whole stretch; at an edge itself the key is free when no
// interval strictly contains it. A window runs from the first stretch with
// two believers to the end of the last such stretch before the key is
// free.
func oracleWindows(grants []*oracleGrant) (windows int, total int64) {
	keys := map[string][]*oracleGrant{}
	for _, g := range grants {
		if g.beliefEnd > g.ok {
			keys[g.key] = append(keys[g.key], g)
		}
	}
	for _, gs := range keys {
		var edges []int64
		for _, g := range gs {
			edges = append(edges, g.ok, g.beliefEnd)
		}
		slices.Sort(edges)
		edges = slices.Compact(edges)
		open, start, lastTwo := false, int64(0), int64(0)
		closeWindow := func() {
			if open {
				windows++
				total += lastTwo - start
				open = false
			}
		}
		for i := 0; i+1 < len(edges); i++ {
			from, to := edges[i], edges[i+1]
			free := true
			believers := map[history.Process]bool{}
			for _, g := range gs {
				if g.ok < from && from < g.beliefEnd {
					free = false
				}
				if g.ok <= from && to <= g.beliefEnd {
					believers[g.process] = true
				}
			}
			if free {
				closeWindow()
			}
			if len(believers) >= 2 {
				if !open {
					open, start = true, from
				}
				lastTwo = to
			}
			if len(believers) == 0 {
				closeWindow()
			}
		}
		closeWindow()
	}
	return windows, total
}

// leaseOp is one lock operation for porcupine's lease-mutex model.
type leaseOp struct {
	f        string
	process  history.Process
	inv, ret int64 // real invoke and completion times; ret is forever when unknown
	expiry   int64 // the lease an acquire or extend promises
	frees    bool  // a release that deleted the key (or may have)
	extends  bool  // an extend the service accepted
}

// leaseState is who holds the lock, until when it is certainly live, and
// the earliest real moment the next operation can take effect: moments of
// effect rise along a linearization, and each lies within its operation.
type leaseState struct {
	holder  history.Process // -1 when free
	freedBy history.Process // the release that freed it, -1 when none
	until   int64
	now     int64
}

// leaseMutexModel: an acquire succeeds only if the lock is free or the
// holder's lease may have ended by some moment within the acquire; a
// release that deleted the key frees it only for the holder (a release
// that deleted another's key changes nothing the model can see); an extend
// is accepted only for the holder (or the client whose release freed the
// lock, which may not have deleted the key everywhere) and pushes the
// holder's lease out. Each operation takes effect at
// the earliest moment it can, which leaves the most room to those after it.
var leaseMutexModel = porcupine.Model{
	Init: func() any { return leaseState{holder: -1, freedBy: -1, now: math.MinInt64} },
	Step: func(state, input, _ any) (bool, any) {
		s, op := state.(leaseState), input.(leaseOp)
		at := max(s.now, op.inv)
		if op.f == history.FAcquire && s.holder >= 0 && s.holder != op.process {
			at = max(at, s.until)
		}
		if at > op.ret {
			return false, s
		}
		s.now = at
		switch op.f {
		case history.FAcquire:
			s.holder, s.until, s.freedBy = op.process, op.expiry, -1
		case history.FRelease:
			if op.frees && s.holder == op.process {
				s.holder, s.freedBy = -1, op.process
			}
		case history.FExtend:
			// The service accepts an extend only of the lease it holds
			// for the client. After the client's own release, which may
			// only have deleted the key on some nodes, it pushes out
			// nothing the model holds.
			if op.extends && s.holder != op.process && (s.holder >= 0 || s.freedBy != op.process) {
				return false, s
			}
			if op.extends && s.holder == op.process {
				s.until = max(s.until, op.expiry)
			}
		}
		return true, s
	},
}

// leaseOperations turns a one-key history into porcupine operations: grants,
// releases and extends. Refused acquires change nothing and are left out,
// as are acquires of unknown outcome (a grant nobody learned of promises
// nobody anything). A release of unknown outcome may take effect at any
// time after its invoke.
//
// comparable is false for a history porcupine cannot order as the model
// does.
func leaseOperations(h *history.History, allowance func(int64) int64) (ops []porcupine.Operation, comparable bool) {
	pending := map[history.Process]history.Event{}
	expiry := func(invoke, ttlMs int64) int64 {
		if ttlMs <= 0 {
			return forever
		}
		return invoke + ttlMs*1e6 - allowance(ttlMs)
	}
	// Real time is the order: operations that touch at one instant are
	// concurrent, as in the model (equal times prove no order). Porcupine
	// would also let one process's operations that touch at an instant
	// swap, which the model does not: such histories are not compared.
	lastDone := map[history.Process]int64{}
	multiNode := map[history.Process]bool{} // the process's last grant was won on several nodes
	comparable = true
	add := func(inv history.Event, done *history.Event, op leaseOp) {
		op.inv, op.ret, op.process = inv.Time, forever, inv.Process
		if done != nil {
			op.ret = done.Time
		}
		ops = append(ops, porcupine.Operation{ClientId: int(inv.Process), Input: op, Call: op.inv, Return: op.ret})
	}
	for _, e := range h.Events {
		if e.Process == history.Nemesis {
			continue
		}
		if e.Type == history.Invoke {
			if last, ok := lastDone[e.Process]; ok && last == e.Time {
				comparable = false
			}
			pending[e.Process] = e
			continue
		}
		lastDone[e.Process] = e.Time
		inv := pending[e.Process]
		delete(pending, e.Process)
		switch inv.F {
		case history.FAcquire:
			if e.Type == history.OK {
				multiNode[e.Process] = e.Value != nil && len(e.Value.Nodes) > 0
				ttl := h.Header.Config.TTLms
				if e.Value != nil && e.Value.TTLms > 0 {
					ttl = e.Value.TTLms
				}
				add(inv, &e, leaseOp{f: inv.F, expiry: expiry(inv.Time, ttl)})
			}
		case history.FRelease:
			switch {
			case e.Type == history.Info:
				add(inv, nil, leaseOp{f: inv.F, frees: true})
			case e.Type == history.OK:
				// A multi-node release that found no majority may have
				// deleted the key on some nodes.
				add(inv, &e, leaseOp{f: inv.F, frees: confirmed(e.Value) || multiNode[e.Process]})
			}
		case history.FExtend:
			if e.Type == history.OK && confirmed(e.Value) && e.Value != nil && e.Value.TTLms > 0 {
				add(inv, &e, leaseOp{f: inv.F, extends: true, expiry: expiry(inv.Time, e.Value.TTLms)})
			}
		}
	}
	for _, inv := range pending {
		if inv.F == history.FRelease {
			add(inv, nil, leaseOp{f: inv.F, frees: true})
		}
	}
	return ops, comparable
}

// The orphaned-lock rule of docs/history.md ("Orphaned locks"), applied
// as the page says it: every acquire's claim from each process's own
// events, the faults that prolong a claim as plain intervals, and every
// pair of unexplained refusals. It knows no session events and no
// multi-node grant (the generator draws none).

// oracleClaim is one claim on the key.
type oracleClaim struct {
	process    history.Process
	start, end int64 // end is forever for a claim that lasts to the end
	ttl        int64 // ms
	// granted is set for a grant's claim, with its ok and when its
	// holder stopped believing (forever: never did).
	granted       bool
	ok, beliefEnd int64
}

// oracleOrphan is one orphaned stretch.
type oracleOrphan struct {
	from, to int64
	refused  int
}

// oracleFaults are the nemesis faults as intervals: a pause from its pause
// to its resume, or to a kill of the same target, or to the end of the
// history; a kill is a point.
func oracleFaults(h *history.History, end int64) map[string][]Interval {
	out := map[string][]Interval{}
	open := map[string]int64{}
	closeAt := func(target string, t int64) {
		if s, ok := open[target]; ok {
			out[target] = append(out[target], Interval{Start: s, End: t})
			delete(open, target)
		}
	}
	for _, e := range h.Events {
		if e.Process != history.Nemesis || e.Value == nil {
			continue
		}
		switch e.F {
		case history.NemPause:
			closeAt(e.Value.Target, e.Time)
			open[e.Value.Target] = e.Time
		case history.NemResume, history.NemKill:
			closeAt(e.Value.Target, e.Time)
		}
	}
	for target := range open {
		closeAt(target, end)
	}
	return out
}

// oracleClaims walks each process's events and gives every acquire that
// was granted, or whose outcome is unknown, its claim.
func oracleClaims(h *history.History, faults map[string][]Interval) []oracleClaim {
	cfgTTL := h.Header.Config.TTLms
	kills := map[history.Process]int64{}
	byProcess := map[history.Process][]history.Event{}
	for _, e := range h.Events {
		if e.Process == history.Nemesis {
			if e.F == history.NemKill && e.Value != nil && strings.HasPrefix(e.Value.Target, "c") {
				n, _ := strconv.Atoi(e.Value.Target[1:])
				kills[history.Process(n)] = e.Time
			}
			continue
		}
		byProcess[e.Process] = append(byProcess[e.Process], e)
	}
	var claims []oracleClaim
	for p, events := range byProcess {
		type grant struct {
			start, ok  int64
			ttl        int64
			believed   bool
			beliefEnd  int64
			claimedEnd int64
			claimed    bool
		}
		var held *grant
		// end closes the held grant's claim as the page says: with a TTL,
		// a TTL after its belief ended (or its grant), unless a release
		// deleted it; without one, at the moment given.
		end := func(g *grant, at, beliefEnd int64, deleted bool) {
			if g.claimed {
				return
			}
			g.claimed = true
			switch {
			case g.ttl > 0 && !deleted && at == forever:
				g.claimedEnd = forever
			case g.ttl > 0 && !deleted:
				g.claimedEnd = max(g.ok, beliefEnd) + g.ttl*1e6
			default:
				g.claimedEnd = at
			}
			claims = append(claims, oracleClaim{process: p, start: g.start, end: g.claimedEnd, ttl: g.ttl, granted: true, ok: g.ok, beliefEnd: beliefEnd})
		}
		kill, killed := kills[p]
		for i := 0; i < len(events); i += 2 {
			inv := events[i]
			var done *history.Event
			if i+1 < len(events) {
				done = &events[i+1]
			}
			invTTL := cfgTTL
			if inv.Value != nil && inv.Value.TTLms > 0 {
				invTTL = inv.Value.TTLms
			}
			switch inv.F {
			case history.FAcquire:
				switch {
				case done == nil && killed:
					claims = append(claims, oracleClaim{process: p, start: inv.Time, end: kill + invTTL*1e6, ttl: invTTL})
				case done == nil:
					claims = append(claims, oracleClaim{process: p, start: inv.Time, end: forever, ttl: invTTL})
				case done.Type == history.Info:
					claims = append(claims, oracleClaim{process: p, start: inv.Time, end: done.Time + invTTL*1e6, ttl: invTTL})
				case done.Type == history.OK:
					ttl := cfgTTL
					if done.Value != nil && done.Value.TTLms > 0 {
						ttl = done.Value.TTLms
					}
					if held != nil {
						if held.believed {
							held.beliefEnd = done.Time
						}
						end(held, done.Time, done.Time, false)
					}
					held = &grant{start: inv.Time, ok: done.Time, ttl: ttl, believed: true}
				}
			case history.FExtend:
				if held != nil && done != nil && (done.Type == history.Info || done.Type == history.OK && confirmed(done.Value)) {
					ttl := held.ttl
					if done.Value != nil && done.Value.TTLms > 0 {
						ttl = done.Value.TTLms
					} else if inv.Value != nil && inv.Value.TTLms > 0 {
						ttl = inv.Value.TTLms
					}
					held.ttl = max(held.ttl, ttl)
				}
			case history.FRelease:
				if held == nil {
					break
				}
				if held.believed {
					held.beliefEnd, held.believed = inv.Time, false
				}
				switch {
				case done == nil && killed:
					end(held, kill, inv.Time, false)
				case done == nil:
					end(held, forever, inv.Time, false)
				case done.Type == history.OK:
					end(held, done.Time, inv.Time, confirmed(done.Value))
					if confirmed(done.Value) {
						held = nil
					}
				case done.Type == history.Fail && held.ttl > 0:
					end(held, done.Time, inv.Time, false)
				case done.Type == history.Info:
					end(held, done.Time, inv.Time, false)
					held = nil
				}
			}
			if done != nil && done.Type == history.Info && held != nil {
				if held.believed {
					held.beliefEnd = done.Time
				}
				end(held, done.Time, held.beliefEnd, false)
				held = nil
			}
		}
		if held != nil {
			switch {
			case killed:
				if held.believed {
					held.beliefEnd = kill
				}
				end(held, kill, held.beliefEnd, false)
			case held.believed:
				end(held, forever, forever, false)
			default:
				end(held, forever, held.beliefEnd, false)
			}
		}
	}
	// A service expires a lease with a TTL whatever its holder believes:
	// when a pause of the holder, begun after the grant and before the
	// holder stopped believing, lasted more than a TTL past the later of
	// its start and the grant, the claim ends there (unless it ended
	// sooner).
	for i := range claims {
		c := &claims[i]
		if !c.granted || c.ttl <= 0 {
			continue
		}
		for _, iv := range faults[c.process.String()] {
			from := max(iv.Start, c.ok)
			if iv.Start < c.beliefEnd && iv.End > c.ok && iv.End > from+c.ttl*1e6 {
				c.end = min(c.end, from+c.ttl*1e6)
			}
		}
	}
	// A fault on a node in force when the claim would end prolongs it
	// until the fault heals; so does one on the claim's own client, for a
	// lock without a TTL (a server cannot see a stopped client's session
	// end).
	for i := range claims {
		c := &claims[i]
		for moved := true; moved && c.end != forever; {
			moved = false
			for target, ivs := range faults {
				if strings.HasPrefix(target, "c") && (target != c.process.String() || c.ttl > 0) {
					continue
				}
				for _, iv := range ivs {
					if iv.Start <= c.end && c.end < iv.End {
						c.end, moved = iv.End, true
					}
				}
			}
		}
	}
	return claims
}

// oracleOrphans finds the orphaned stretches: the busy refusals no claim
// overlaps, grouped by the gaps between claims, and each group whose first
// answer and last invoke lie more than 2 × TTL + 1 s apart (the largest
// TTL of the claims begun before the group's last answer).
func oracleOrphans(h *history.History) []oracleOrphan {
	if len(h.Events) == 0 {
		return nil
	}
	start, end, runEnd := h.Events[0].Time, h.Events[0].Time, int64(-1)
	for _, e := range h.Events {
		start, end = min(start, e.Time), max(end, e.Time)
		if e.F == history.NemRunEnd && runEnd < 0 {
			runEnd = e.Time
		}
	}
	if runEnd < 0 {
		runEnd = end
	}
	claims := oracleClaims(h, oracleFaults(h, end))
	overlaps := func(c oracleClaim, from, to int64) bool { return c.start <= to && c.end >= from }
	type refusal struct{ inv, done int64 }
	var unexplained []refusal
	pending := map[history.Process]history.Event{}
	for _, e := range h.Events {
		if e.Process == history.Nemesis {
			continue
		}
		if e.Type == history.Invoke {
			pending[e.Process] = e
			continue
		}
		inv := pending[e.Process]
		if inv.F != history.FAcquire || e.Type != history.Fail || (e.Value != nil && e.Value.Refused) {
			continue
		}
		if !slices.ContainsFunc(claims, func(c oracleClaim) bool { return overlaps(c, inv.Time, e.Time) }) {
			unexplained = append(unexplained, refusal{inv.Time, e.Time})
		}
	}
	slices.SortFunc(unexplained, func(a, b refusal) int { return cmp.Or(cmp.Compare(a.inv, b.inv), cmp.Compare(a.done, b.done)) })
	var out []oracleOrphan
	for i := 0; i < len(unexplained); {
		group := []refusal{unexplained[i]}
		j := i + 1
		for ; j < len(unexplained); j++ {
			from, to := group[0].inv, unexplained[j].done
			if slices.ContainsFunc(claims, func(c oracleClaim) bool { return overlaps(c, from, to) }) {
				break
			}
			group = append(group, unexplained[j])
		}
		i = j
		firstDone, lastInv, lastDone := forever, int64(math.MinInt64), int64(math.MinInt64)
		for _, r := range group {
			firstDone, lastInv, lastDone = min(firstDone, r.done), max(lastInv, r.inv), max(lastDone, r.done)
		}
		var ttl int64
		from, to := start, runEnd
		for _, c := range claims {
			if c.start <= lastDone {
				ttl = max(ttl, c.ttl)
			}
			if c.end < group[0].inv {
				from = max(from, c.end)
			}
			if c.start > lastDone {
				to = min(to, c.start)
			}
		}
		if lastInv-firstDone > 2*ttl*1e6+1e9 {
			out = append(out, oracleOrphan{from: from, to: max(to, from), refused: len(group)})
		}
	}
	return out
}
