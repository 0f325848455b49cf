package program

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/history"
)

// The rules of the conformance check beyond the protocol's own.
const (
	RuleDeclare   = "init_ok names the library and its version"
	RuleGrant     = "acquire of a free lock is acquire_ok with a token and ttl_ms (and fence when supports.fence)"
	RuleRefusal   = "acquire while another client holds the lock is error code 40"
	RuleRelease   = "release of a held lock is release_ok with deleted true, and frees it"
	RuleNewGrant  = "every grant has a token of its own, and a fence above the key's earlier ones when supports.fence"
	RuleExpired   = "release after the lease ran out (the client stopped past it) is release_ok with deleted false"
	RuleRestart   = "a client killed after a timeout starts again and answers init"
	RuleFailpoint = "a declared failpoint aimed at in init is sent, and the client goes on after failpoint_ok"
	// RuleLease is broken by a program that over-claims its lease: the
	// checker takes a grant to be live for ttl_ms from its acquire, so a
	// longer claim than the service's hides every expiry.
	RuleLease = "the lease acquire_ok claims (ttl_ms from the acquire) is the service's: inside it another client's acquire is refused"
	// RuleRenewal is broken by a renewal the service never made: the
	// checker takes each to push the lease out.
	RuleRenewal = "a renewal (extend_ok extended true, or renewed) is the service's: the lease runs ttl_ms from it"
	// RuleSentNs is broken by sent_ns on another clock; run records such a
	// renewal as an observation "not CLOCK_MONOTONIC".
	RuleSentNs = "renewed's sent_ns is CLOCK_MONOTONIC ns: after the acquire of the grant it renews, and not after lockcheck read it"
)

// ServiceLease is what the service holds for a lock key at one moment, as
// the check reads it where the topology lets it (Redis: the key's value
// and PTTL).
type ServiceLease struct {
	// Held says the key exists; Holder is what it holds (the token, or
	// the library's own value).
	Held   bool
	Holder string
	// Left is how long the key lives on; negative for no expiry.
	Left time.Duration
}

// Failure is one rule a client broke in the conformance check.
type Failure struct {
	// Message is the message at fault (init, acquire, ...).
	Message string
	Rule    string
	Detail  string
}

func (f Failure) String() string {
	return fmt.Sprintf("%s: %s (rule: %s)", f.Message, f.Detail, f.Rule)
}

// Conformance is what the check needs: a way to start the client in a
// slot (with the failpoints aimed at), keys that are free, and whether
// the topology's grants last until release (a session lock: no lease runs
// out).
type Conformance struct {
	Open func(slot string, failpoints []string, fp backends.Failpoint) (*Lock, error)
	// Keys are four free lock keys.
	Keys         [4]string
	TTL, Timeout time.Duration
	UntilRelease bool
	// Lease reads the service's lease on a key, where the topology lets
	// the check (nil where it does not): grants and renewals are then
	// held to it as well as to a second client's refusal.
	Lease func(ctx context.Context, key string) (ServiceLease, error)
}

// checkRun is one run of the check.
type checkRun struct {
	Conformance
	ctx   context.Context
	mu    sync.Mutex
	fails []Failure
}

// Check runs the client through the protocol: handshake, a grant, a
// certain refusal while another holds the lock, a release that deletes,
// the lease the grant claims (held, renewed, then run out while the
// client is stopped), an unknown outcome on a timeout, a failpoint round
// trip and a clean exit on EOF of stdin. Every step runs under ctx: when
// it is done the check ends at once, killing the programs. It returns
// every rule broken; none means the client conforms (when ctx is not
// done).
func (c Conformance) Check(ctx context.Context) []Failure {
	k := &checkRun{Conformance: c, ctx: ctx}
	k.run()
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.fails)
}

func (k *checkRun) fail(msg, rule string, err error) {
	if k.ctx.Err() != nil {
		return // the check was ended; what failed since is its doing
	}
	f := Failure{Message: msg, Rule: rule, Detail: err.Error()}
	if v := (*Violation)(nil); errors.As(err, &v) {
		f.Rule, f.Detail = v.Rule, v.What()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if f.Rule == RuleExit && slices.ContainsFunc(k.fails, func(g Failure) bool { return g.Rule == f.Rule && g.Detail == f.Detail }) {
		return // one death, seen by an operation and by a step's look
	}
	k.fails = append(k.fails, f)
}

// open starts a client in slot, or gives up when the check is ended (the
// program started meanwhile is killed once it answers).
func (k *checkRun) open(slot string, failpoints []string, fp backends.Failpoint) (*Lock, error) {
	type opened struct {
		l   *Lock
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		l, err := k.Open(slot, failpoints, fp)
		ch <- opened{l, err}
	}()
	select {
	case o := <-ch:
		if o.l != nil {
			o.l.Reports(k.broken)
		}
		return o.l, o.err
	case <-k.ctx.Done():
		go func() {
			if o := <-ch; o.l != nil {
				o.l.abort()
			}
		}()
		return nil, k.ctx.Err()
	}
}

// broken fails the check for a rule the program broke that no step's
// reply showed: one broken after a reply was taken (a duplicate reply) or
// in a message nobody asked for, which the Lock reports as a run records
// it (a client-violation).
func (k *checkRun) broken(r backends.Report) {
	if r.Rule != "" {
		k.fail("protocol", r.Rule, errors.New(r.Why))
	}
}

// close ends a client as the protocol asks, or at once when the check was
// ended.
func (k *checkRun) close(l *Lock) error {
	if k.ctx.Err() != nil {
		l.abort()
		return nil
	}
	return l.Close()
}

// sleepUntil waits until t on the history's clock; false when the check
// was ended first.
func (k *checkRun) sleepUntil(t int64) bool {
	d := time.Duration(t - history.Now())
	if d <= 0 {
		return k.ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-k.ctx.Done():
		return false
	}
}

func (k *checkRun) run() {
	a, err := k.open("c0", nil, nil)
	if err != nil {
		k.fail("init", RuleInit, err)
		return
	}
	defer k.close(a)
	if d := a.Declaration(); d.Library == "" || d.Version == "" {
		k.fail("init_ok", RuleDeclare, fmt.Errorf("library %q, version %q", d.Library, d.Version))
	}
	fenced := a.Declaration().Supports.Fence
	// The second client starts before the first takes the lock: an
	// interpreter's start can outlast a lease.
	b, err := k.open("c1", nil, nil)
	if err != nil {
		k.fail("init", RuleInit, err)
		return
	}
	defer k.close(b)

	key := k.Keys[0]
	g, err := a.Acquire(k.ctx, key)
	if err != nil {
		k.fail("acquire", RuleGrant, err)
		return
	}
	switch {
	case g.TTL <= 0 && !k.UntilRelease:
		k.fail("acquire_ok", RuleGrant, errors.New("no ttl_ms"))
	case fenced && g.Fence == nil:
		k.fail("acquire_ok", RuleGrant, errors.New("no fence, though init_ok says supports.fence"))
	}

	if _, err := b.Acquire(k.ctx, key); !errors.Is(err, backends.ErrNotAcquired) {
		k.fail("acquire", RuleRefusal, fmt.Errorf("another client holds %s, and the reply was %v", key, errOrGrant(err)))
	}
	deleted, err := a.Release(k.ctx, key, g)
	switch {
	case err != nil:
		k.fail("release", RuleRelease, err)
	case !deleted:
		k.fail("release_ok", RuleRelease, errors.New("deleted false for the grant that holds the lock"))
	}
	if g2, err := b.Acquire(k.ctx, key); err != nil {
		k.fail("acquire", RuleRelease, fmt.Errorf("after the release, acquire of %s: %v", key, err))
	} else {
		switch {
		case g2.Token == g.Token:
			k.fail("acquire_ok", RuleNewGrant, fmt.Errorf("the next grant of %s has the token %q again", key, g.Token))
		case fenced && g.Fence != nil && g2.Fence != nil && *g2.Fence <= *g.Fence:
			k.fail("acquire_ok", RuleNewGrant, fmt.Errorf("the next grant of %s has fence %d, not above %d", key, *g2.Fence, *g.Fence))
		}
		b.Release(k.ctx, key, g2) //nolint:errcheck // tidying up
	}

	// A grant with no lease was named above; stopping the client past a
	// lease of 0 would test nothing.
	if !k.UntilRelease && g.TTL > 0 {
		k.checkLease(a, b)
	}
	k.checkTimeout(a)
	k.checkFailpoint(a.Declaration())
	if k.ctx.Err() != nil {
		return
	}

	stderr := a.StderrBytes() + b.StderrBytes()
	if err := a.Close(); err != nil {
		k.fail("EOF", RuleEOF, err)
	}
	if err := b.Close(); err != nil {
		k.fail("EOF", RuleEOF, err)
	}
	if stderr > 2*StderrKeep {
		k.fail("stderr", RuleStderr, fmt.Errorf("%d bytes of stderr in a check of a few operations", stderr))
	}
}

// claim is a lease the program says it holds: ttl from from (the acquire's
// or extend's invoke, a renewal's sent_ns), on the history's clock.
type claim struct {
	what     string // "acquire_ok", "extend_ok", "renewed"
	from     int64
	ttl      time.Duration
	received int64
}

// earliest is the soonest the claimed lease may end (history.LeaseEnds).
func (c claim) earliest() int64 {
	e, _ := history.LeaseEnds(c.from, c.received, c.ttl, history.ClockAllowance(c.ttl))
	return e
}

func (c claim) rule() string {
	if c.what == "acquire_ok" {
		return RuleLease
	}
	return RuleRenewal
}

// checkLease holds a lock through one lease (a library's watchdog renews
// it meanwhile; with supports.extend the check extends it halfway), then
// stops the client, as a GC pause would stop it, so that nothing renews
// it: a second client's acquire just before the latest lease claimed runs
// out must be refused, and the holder's release after it ran out must
// delete nothing. Where the service's lease can be read, every claim is
// held to it as it is made.
func (k *checkRun) checkLease(a, b *Lock) {
	key := k.Keys[1]
	w := &renewals{k: k, key: key}
	a.Reports(func(r backends.Report) { k.broken(r); w.report(r) })
	defer a.Reports(k.broken)
	invoke := history.Now()
	g, err := a.Acquire(k.ctx, key)
	if err != nil {
		k.fail("acquire", RuleGrant, err)
		return
	}
	w.hold(g, claim{what: "acquire_ok", from: invoke, ttl: g.TTL, received: history.Now()})
	// The client runs through the lease it was told to ask for, or the
	// shorter one granted, so that a watchdog renews: a longer lease
	// claimed is waited out stopped.
	hold := min(g.TTL, k.TTL)
	if a.Declaration().Supports.Extend && k.sleepUntil(invoke+int64(hold/2)) {
		if _, ok := k.live(a, "the extend"); !ok {
			return // its grant died with it
		}
		from := history.Now()
		switch ok, err := a.Extend(k.ctx, key, g); {
		case err != nil:
			k.fail("extend", RuleRenewal, fmt.Errorf("extend of %s, held for half its lease: %w", key, err))
		case !ok:
			k.fail("extend_ok", RuleRenewal, fmt.Errorf("extended false for %s, held for half its lease", key))
		default:
			w.extended(claim{what: "extend_ok", from: from, ttl: g.TTL, received: history.Now()})
		}
	}
	if !k.sleepUntil(invoke + int64(hold)) {
		return
	}
	p, ok := k.live(a, "the lease's stop")
	if !ok {
		return
	}
	stoppedAt := history.Now()
	p.stop()
	stopped := true
	defer func() {
		if stopped {
			p.signal(syscall.SIGCONT)
		}
	}()
	latest := w.latest()
	// b's acquire must reach the service before the claim ends: it is
	// sent a third of the lease early, and again a tenth early (a small
	// over-claim), and judged only if its grant certainly came inside the
	// claim.
	for _, early := range []time.Duration{latest.ttl / 3, latest.ttl / 10} {
		if !k.sleepUntil(latest.earliest() - int64(early) - int64(10*time.Millisecond)) {
			return
		}
		latest = w.latest()
		sent := history.Now()
		g2, err := b.Acquire(k.ctx, key)
		if err != nil {
			continue
		}
		if got := history.Now(); got < latest.earliest() {
			c := w.broken(got)
			k.fail("acquire", c.rule(), fmt.Errorf("a second client was granted %s %s after the holder's %s (%s), inside the %s lease it claims, while the holder was stopped",
				key, ms(sent-c.from), c.what, claimWhen(c), c.ttl))
		}
		b.Release(k.ctx, key, g2) //nolint:errcheck // tidying up
		break
	}
	// Past every lease claimed, with the stop at least half a lease past
	// the last.
	end := max(stoppedAt+int64(g.TTL+g.TTL/2), latest.from+int64(latest.ttl+latest.ttl/2)) + int64(50*time.Millisecond)
	if !k.sleepUntil(end) {
		return
	}
	p.signal(syscall.SIGCONT)
	stopped = false
	w.release()
	if deleted, err := a.Release(k.ctx, key, g); err != nil {
		k.fail("release", RuleExpired, err)
	} else if deleted {
		k.fail("release_ok", RuleExpired, fmt.Errorf("deleted true after the client was stopped for %s, past its %s lease", ms(end-stoppedAt), latest.ttl))
	}
}

func claimWhen(c claim) string {
	if c.what == "renewed" {
		return "sent_ns"
	}
	return "invoke"
}

func ms(ns int64) string { return time.Duration(ns).Round(time.Millisecond).String() }

// against holds c to the service's lease on key, where it can be read: the
// key, read after c, must live at least until c's earliest end. holder is
// what the key held at the grant ("": c is the grant); a key of another
// holder (a second client's) says nothing of c, nor does a read that
// still, when set, says came after the grant was let go. It returns what
// the key holds, and tells fail of a claim the key does not bear out.
func (k *checkRun) against(key string, c claim, holder string, still func() bool, fail func(msg, rule string, err error)) string {
	if k.Lease == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(k.ctx, k.Timeout)
	sl, err := k.Lease(ctx, key)
	cancel()
	read := history.Now()
	switch {
	case err != nil, still != nil && !still():
		return ""
	case !sl.Held && c.what == "acquire_ok":
		// The program keeps its lock under other names: its lease
		// cannot be read here, and the second client's refusal judges it.
		return ""
	case sl.Held && holder != "" && sl.Holder != holder:
		return ""
	case sl.Held && sl.Left < 0:
		return sl.Holder // no expiry: no claim outlives it
	}
	// A key gone was gone when the read answered; PTTL rounds down to
	// whole milliseconds.
	end := read
	if sl.Held {
		end += int64(sl.Left + time.Millisecond)
	}
	if c.earliest() > end {
		left := "was gone"
		if sl.Held {
			left = fmt.Sprintf("had %s left (PTTL)", sl.Left)
		}
		fail(c.what, c.rule(), fmt.Errorf("%s claims a %s lease on %s from its %s; %s after it the service's key %s", c.what, c.ttl, key, claimWhen(c), ms(read-c.from), left))
	}
	return sl.Holder
}

// renewals follows the renewed messages of the grant checkLease holds:
// each is a claim, its sent_ns on the history's clock, held to the
// service's lease where it can be read.
type renewals struct {
	k   *checkRun
	key string

	mu     sync.Mutex
	token  string // "" when no grant is held
	holder string // what the service's key holds for it
	claims []claim
	// reading is a read of the service in flight: one at a time, so
	// that a program that floods renewals is not read for each.
	reading bool
	// failed holds the rules renewals broke: each is named once.
	failed map[string]bool
}

// fail names rule for a renewal, once.
func (w *renewals) fail(msg, rule string, err error) {
	w.mu.Lock()
	again := w.failed[rule]
	if w.failed == nil {
		w.failed = map[string]bool{}
	}
	w.failed[rule] = true
	w.mu.Unlock()
	if !again {
		w.k.fail(msg, rule, err)
	}
}

func (w *renewals) hold(g backends.Grant, c claim) {
	w.mu.Lock()
	w.token, w.claims = g.Token, []claim{c}
	w.mu.Unlock()
	holder := w.k.against(w.key, c, "", nil, w.k.fail)
	w.mu.Lock()
	w.holder = holder
	w.mu.Unlock()
}

// extended adds the claim of an extend_ok.
func (w *renewals) extended(c claim) {
	w.mu.Lock()
	w.claims = append(w.claims, c)
	holder := w.holder
	w.mu.Unlock()
	w.k.against(w.key, c, holder, nil, w.k.fail)
}

// latest is the claim that ends last.
func (w *renewals) latest() claim {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.claims[0]
	for _, c := range w.claims[1:] {
		if c.earliest() > l.earliest() {
			l = c
		}
	}
	return l
}

// broken is the claim a grant to another client at got certainly broke:
// the grant's own when it still held then (its lie suffices, whatever
// renewals followed), else the one that ends last.
func (w *renewals) broken(got int64) claim {
	w.mu.Lock()
	first := w.claims[0]
	w.mu.Unlock()
	if got < first.earliest() {
		return first
	}
	return w.latest()
}

// release ends the hold before the release is sent: the key it deletes
// says nothing of a renewal.
func (w *renewals) release() {
	w.mu.Lock()
	w.token = ""
	w.mu.Unlock()
}

func (w *renewals) held(token string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return token != "" && w.token == token
}

func (w *renewals) report(r backends.Report) {
	if r.Lost || r.Rule != "" {
		return
	}
	read := history.Now() - int64(time.Since(r.At))
	w.mu.Lock()
	if r.Token != w.token || r.Key != w.key || len(w.claims) == 0 {
		w.mu.Unlock()
		return
	}
	first := w.claims[0]
	w.mu.Unlock()
	switch {
	case r.Sent == 0:
		return // when it was sent is unknown: run takes it for no renewal
	case r.Sent < first.from:
		w.fail("renewed", RuleSentNs, fmt.Errorf("sent_ns %d is %s before the acquire of the grant it renews (%s): not CLOCK_MONOTONIC", r.Sent, ms(first.from-r.Sent), w.key))
		return
	case r.Sent > read:
		w.fail("renewed", RuleSentNs, fmt.Errorf("sent_ns %d is %s after lockcheck read the message (%s): not CLOCK_MONOTONIC", r.Sent, ms(r.Sent-read), w.key))
		return
	}
	ttl := r.TTL
	if ttl <= 0 {
		ttl = first.ttl
	}
	c := claim{what: "renewed", from: r.Sent, ttl: ttl, received: read}
	w.mu.Lock()
	w.claims = append(w.claims, c)
	busy := w.reading
	w.reading = true
	token, holder := w.token, w.holder
	w.mu.Unlock()
	if busy {
		return
	}
	w.k.against(w.key, c, holder, func() bool { return w.held(token) }, w.fail)
	w.mu.Lock()
	w.reading = false
	w.mu.Unlock()
}

// live returns l's program, running, for a step to act on. One that died
// on its own since the last operation broke RuleExit (a program runs until
// its stdin closes): it is named, and started again, since a stop sent to
// it would stop nothing and the step's request would reach a program that
// was never stopped.
func (k *checkRun) live(l *Lock, step string) (*proc, bool) {
	l.mu.Lock()
	died := l.died
	l.died = nil
	if cur := l.cur; died == nil && cur != nil {
		// Exited, and maybe not yet noticed; one an operation already
		// reported is named once (fail).
		died = cur.diedOnItsOwn(0)
	}
	p, err := l.running()
	l.mu.Unlock()
	if died != nil {
		k.fail(step, RuleExit, died)
	}
	if err != nil {
		k.fail("init", RuleRestart, fmt.Errorf("before %s: %w", step, err))
		return nil, false
	}
	return p, died == nil
}

// diedOnItsOwn is why p ended unasked, waiting up to wait for an exit
// under way; nil while it runs, or when lockcheck killed it (with SIGKILL,
// the only signal it ends a program with).
func (p *proc) diedOnItsOwn(wait time.Duration) error {
	select {
	case <-p.exited:
	default:
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-p.exited:
		case <-timer.C:
			return nil
		}
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return nil
	}
	return &Violation{Slot: p.slot, Rule: RuleExit, Detail: "exited (" + p.cmd.ProcessState.String() + ")"}
}

// starts is how many times l's program was started.
func (l *Lock) starts() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started
}

// abort kills l's program at once: the check was ended, and the wait for
// an exit on EOF is owed to nobody.
func (l *Lock) abort() {
	l.mu.Lock()
	p := l.cur
	l.cur = nil
	l.mu.Unlock()
	if p != nil {
		p.kill()
		<-p.exited
	}
	l.log.Close()
}

// checkTimeout stops the client (SIGSTOP) before it reads an acquire: the
// acquire's outcome is unknown, the client is killed, and the next
// operation starts it again.
func (k *checkRun) checkTimeout(a *Lock) {
	if k.ctx.Err() != nil {
		return
	}
	key := k.Keys[2]
	p, _ := k.live(a, "the timeout's stop")
	if p == nil {
		return
	}
	starts := a.starts()
	p.stop()
	_, err := a.Acquire(k.ctx, key)
	p.signal(syscall.SIGCONT)
	switch {
	case k.ctx.Err() != nil:
		return
	case p.diedOnItsOwn(100*time.Millisecond) != nil:
		// It died between the check's look and the stop: no stop was
		// tested, and its death is what it broke.
		k.fail("acquire", RuleExit, p.diedOnItsOwn(0))
		return
	case a.starts() != starts:
		k.fail("acquire", RuleRestart, errors.New("the stopped client was started again before the check's acquire reached it"))
		return
	case err == nil || errors.Is(err, backends.ErrNotAcquired):
		k.fail("acquire", RuleTime, fmt.Errorf("a stopped client's acquire was %v, not an unknown outcome", errOrGrant(err)))
		return
	}
	g, err := a.Acquire(k.ctx, key)
	var v *Violation
	switch {
	case errors.As(err, &v) && (v.Rule == RuleStart || v.Rule == RuleInit):
		// It did not start again: that is the rule it broke, whatever
		// the start's own rule says.
		k.fail("init", RuleRestart, errors.New(v.What()))
		return
	case err != nil:
		// It started again and answered init; the acquire itself failed.
		k.fail("acquire", RuleGrant, fmt.Errorf("after the client was killed and started again, acquire of %s: %w", key, err))
		return
	}
	a.Release(k.ctx, key, g) //nolint:errcheck // tidying up
}

// checkFailpoint starts a client with every failpoint it declared aimed
// at, holds a lock for two leases, and expects at least one failpoint
// message, which it answers.
func (k *checkRun) checkFailpoint(d Declaration) {
	if len(d.Failpoints) == 0 || k.ctx.Err() != nil {
		return
	}
	hit := make(chan string, 16)
	f, err := k.open("c2", d.Failpoints, func(name string) {
		select {
		case hit <- name:
		default:
		}
	})
	if err != nil {
		k.fail("init", RuleInit, err)
		return
	}
	defer k.close(f)
	key := k.Keys[3]
	g, err := f.Acquire(k.ctx, key)
	if err != nil {
		k.fail("acquire", RuleGrant, err)
		return
	}
	wait := 2*k.TTL + k.Timeout
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-hit:
	case <-k.ctx.Done():
		return
	case <-timer.C:
		k.fail("failpoint", RuleFailpoint, fmt.Errorf("declared %v, aimed at all, and none was sent while a lock was held for %s", d.Failpoints, wait))
	}
	if _, err := f.Release(k.ctx, key, g); err != nil {
		k.fail("release", RuleFailpoint, fmt.Errorf("after failpoint_ok: %v", err))
	}
}

func errOrGrant(err error) string {
	if err == nil {
		return "a grant"
	}
	return err.Error()
}
