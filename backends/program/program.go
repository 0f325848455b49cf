// Package program is a lock client that is a program of its own, in any
// language, speaking lockcheck's client protocol (docs/clients.md): JSON
// lines on its stdin and stdout. The Lock starts the program as a child of
// the process that opens it (a run's worker), in that process's group, so
// that a fault that stops or kills the worker stops or kills every thread
// of the library with it, and maps the program's replies onto
// backends.Lock.
package program

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/internal/procstate"
	"github.com/lockcheck/lockcheck/internal/spawn"
)

// DefaultInitTimeout bounds the wait for init_ok when Options says
// nothing: an interpreter that imports a client library takes its time.
//
// Every slot's program starts at once, on a machine that may be busy: on 2
// cores at a load average of 26, five JVMs of the Curator reference client
// missed 10 s, though alone they answer in under a second
// (examples/clients/curator/README.md). A longer wait costs a program that
// answers sooner nothing (the run's time starts once every slot answered);
// only one that never answers is reported later.
const DefaultInitTimeout = 30 * time.Second

// Options are what a client program is started with and told in init.
type Options struct {
	// Client is filled from the lock spec where the program is opened.
	backends.Client `json:"-"`
	// Command is the program and its arguments (no shell).
	Command []string `json:"command"`
	// Slot names the client (c0); Process is its process number, which
	// grows by Stride at each restart of the program.
	Slot    string `json:"slot"`
	Process int    `json:"process"`
	Stride  int    `json:"stride"`
	// Backend is the name the client is tested under, Topology the
	// built-in backend whose servers it talks to.
	Backend    string            `json:"backend"`
	Topology   string            `json:"topology"`
	Addrs      []string          `json:"addrs"`
	Nodes      []NodeAddr        `json:"nodes"`
	KeyPrefix  string            `json:"key_prefix"`
	Failpoints []string          `json:"failpoints"`
	Settings   map[string]string `json:"settings"`
	// InitTimeout bounds the wait for init_ok (0: DefaultInitTimeout).
	InitTimeout time.Duration `json:"init_timeout"`
	// LogPath is the file the program's stderr goes to, bounded
	// (StderrKeep); "" discards it.
	LogPath string `json:"log_path"`
	// Warn, if set, gets every violation and death of the program, one
	// line each, as it happens (the worker's log).
	Warn func(string) `json:"-"`
}

// Lock is a client program, started at Open and again after it died or
// was killed.
type Lock struct {
	opts Options
	log  *stderrLog

	// mu makes one request at a time.
	mu      sync.Mutex
	cur     *proc
	decl    Declaration
	nextID  int64
	started int
	// died is why the program died on its own since the last operation:
	// the next operation reports it as its unknown outcome.
	died error

	rmu    sync.Mutex
	report func(backends.Report)
	lost   map[string]chan struct{} // by token, for Grant.Lost
}

// granted registers the lost channel of the grant an acquire_ok names,
// on the reader's goroutine before the reply is handed on: a lost read
// right after it (in the same write) closes it, whenever Acquire returns.
func (l *Lock) granted(m *message) {
	m.lost = make(chan struct{})
	l.rmu.Lock()
	l.lost[*m.Token] = m.lost
	l.rmu.Unlock()
}

// broke records that the program broke rule v, as it happens: in the
// worker's log and the program's, and as a report the client loop records
// in the history (a client-violation event), so the run is judged
// unknown with the rule named, never a silent pass. It is called before
// the program is ended for it, and hands the report over at once (not on
// a goroutine of its own, as deliver does): the operation the break ends
// is still in flight, so the loop records it under that operation's
// process, not the one it retires to.
func (l *Lock) broke(v *Violation) {
	l.warn(v.Error())
	l.rmu.Lock()
	f := l.report
	l.rmu.Unlock()
	if f != nil {
		f(backends.Report{Rule: v.Rule, Why: v.Said(), At: time.Now()})
	}
}

var _ backends.Reporter = (*Lock)(nil)

// Open starts the program and waits for its init_ok.
func Open(opts Options) (*Lock, error) {
	if len(opts.Command) == 0 {
		return nil, &Violation{Slot: opts.Slot, Rule: RuleStart, Detail: "no command"}
	}
	if opts.InitTimeout <= 0 {
		opts.InitTimeout = DefaultInitTimeout
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Second
	}
	if opts.Stride <= 0 {
		opts.Stride = 1
	}
	log, err := openStderrLog(opts.LogPath)
	if err != nil {
		return nil, err
	}
	l := &Lock{opts: opts, log: log, lost: map[string]chan struct{}{}}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.running(); err != nil {
		l.log.Close()
		return nil, err
	}
	return l, nil
}

// Declaration is what the program said of itself in its latest init_ok.
func (l *Lock) Declaration() Declaration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.decl
}

// Reports implements backends.Reporter.
func (l *Lock) Reports(f func(backends.Report)) {
	l.rmu.Lock()
	l.report = f
	l.rmu.Unlock()
}

// StderrBytes is how much the program wrote to its stderr so far, over
// all its starts.
func (l *Lock) StderrBytes() int64 { return l.log.total() }

// running returns the program, started (and told init) if it is not
// running. l.mu is held.
func (l *Lock) running() (*proc, error) {
	if l.cur != nil && !l.cur.isDead() {
		return l.cur, nil
	}
	if l.cur != nil {
		l.cur = nil
	}
	process := l.opts.Process + l.started*l.opts.Stride
	l.started++
	p, err := l.start(process)
	if err != nil {
		return nil, err
	}
	l.cur = p
	return p, nil
}

func (l *Lock) warn(msg string) {
	if l.opts.Warn != nil {
		l.opts.Warn(msg)
	}
	l.log.note(msg)
}

// start starts the program as process and runs the handshake.
func (l *Lock) start(process int) (*proc, error) {
	o := l.opts
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	cmd.Env = os.Environ()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// A pipe of our own, not StderrPipe: Wait would close that one at
	// the program's exit, maybe before its last line was read, and that
	// line is what a program that could not start has to say.
	stderr, stderrW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = stderrW
	// The program stays in this process's group: a stop or kill of the
	// worker's group reaches every thread of the library. It runs caged,
	// so that nothing it starts outlives it, the worker or lockcheck.
	err = spawn.StartCaged(cmd)
	stderrW.Close()
	if err != nil {
		stderr.Close()
		return nil, &Violation{Slot: o.Slot, Rule: RuleStart, Detail: fmt.Sprintf("command %q does not start: %v", strings.Join(o.Command, " "), err)}
	}
	p := &proc{
		slot: o.Slot, cmd: cmd, stdin: stdin, replies: make(chan message, 1), dead: make(chan struct{}),
		exited: make(chan struct{}), parkChange: make(chan struct{}, 1), lock: l,
	}
	l.log.restart()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		defer stderr.Close()
		l.log.copy(stderr)
	}()
	go p.read(stdout)
	go p.reap()

	nodes := o.Nodes
	if nodes == nil {
		nodes = []NodeAddr{}
	}
	fps, settings := o.Failpoints, o.Settings
	if fps == nil {
		fps = []string{}
	}
	if settings == nil {
		settings = map[string]string{}
	}
	l.nextID = 1
	msg := initMsg{
		Type: TypeInit, MsgID: l.nextID, Protocol: Version, Client: o.Slot, Process: process,
		Backend: o.Backend, Topology: o.Topology, Addrs: o.Addrs, Nodes: nodes, KeyPrefix: o.KeyPrefix,
		TTLms: o.TTL.Milliseconds(), TimeoutMs: o.Timeout.Milliseconds(), Failpoints: fps, Settings: settings,
	}
	p.expect(l.nextID)
	reply, err := p.exchange(context.Background(), msg, o.InitTimeout)
	if err == nil && reply.Type != TypeInit+replySuffix {
		err = &Violation{Slot: o.Slot, Rule: RuleInit, Detail: fmt.Sprintf("init answered by %s (code %d: %s)", reply.Type, deref(reply.Code), reply.Text)}
	}
	var timeout *timeoutError
	if errors.As(err, &timeout) {
		err = &Violation{Slot: o.Slot, Rule: RuleInit, Detail: fmt.Sprintf("no init_ok within %s", o.InitTimeout)}
	}
	if err != nil {
		p.kill()
		return nil, withLastLine(err, l.log, copied)
	}
	l.decl = Declaration{Library: *reply.Library, Version: *reply.Version, Failpoints: reply.FPs}
	if reply.Supports != nil {
		l.decl.Supports = *reply.Supports
	}
	return p, nil
}

// withLastLine adds the last line the program wrote to its stderr to err,
// a start that failed, once its stderr is read to the end (or after a
// second: a child of the program may keep it open).
func withLastLine(err error, log *stderrLog, copied <-chan struct{}) error {
	select {
	case <-copied:
	case <-time.After(time.Second):
	}
	line := log.lastLine()
	var v *Violation
	if line == "" || !errors.As(err, &v) {
		return err
	}
	with := *v
	with.Detail += fmt.Sprintf("; its last line on stderr: %q", line)
	return &with
}

// call sends req and waits for its reply within the operation timeout, or
// until ctx is done. A program that does not answer in time is killed (and
// started again by the next call): its outcome is unknown.
func (l *Lock) call(ctx context.Context, req request) (message, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.died; err != nil {
		// The program died on its own since the last operation: whatever
		// the library held, it holds no more, and this operation's
		// outcome is as unknown as a crashed application's.
		l.died = nil
		return message{}, fmt.Errorf("%w; the operation was not sent, and the client starts again", err)
	}
	p, err := l.running()
	if err != nil {
		return message{}, err
	}
	l.nextID++
	req.MsgID = l.nextID
	p.expect(req.MsgID)
	reply, err := p.exchange(ctx, req, l.opts.Timeout)
	var timeout *timeoutError
	switch {
	case errors.As(err, &timeout):
		p.kill()
		return message{}, fmt.Errorf("client %s: no reply to %s within %s: outcome unknown; the client is killed and starts again", l.opts.Slot, req.Type, l.opts.Timeout)
	case err != nil:
		p.kill()
		return message{}, err
	case reply.Type == TypeError:
		return reply, replyError(l.opts.Slot, req.Type, reply)
	case reply.Type != req.Type+replySuffix:
		v := &Violation{Slot: l.opts.Slot, Rule: RuleReply, Detail: fmt.Sprintf("%s answered by %s", req.Type, reply.Type)}
		l.broke(v)
		p.kill()
		return message{}, v
	}
	return reply, nil
}

// CodeError is an error reply of the program.
type CodeError struct {
	Slot, Op string
	Code     int
	Text     string
}

func (e *CodeError) Error() string {
	kind := "indefinite: outcome unknown"
	if Definite(e.Code) {
		kind = "definite: it did not take effect"
	}
	return fmt.Sprintf("client %s: %s: error %d (%s): %s", e.Slot, e.Op, e.Code, kind, e.Text)
}

// Is makes a lock-held refusal backends.ErrNotAcquired, a request the
// client sent nothing of backends.ErrNotSent, and every other definite
// refusal of an acquire backends.ErrRefused (both also ErrNotAcquired): the
// grant certainly did not happen.
func (e *CodeError) Is(target error) bool {
	if e.Op != TypeAcquire || !Definite(e.Code) {
		return false
	}
	switch e.Code {
	case CodeLockHeld:
		return target == backends.ErrNotAcquired
	case CodeNotSent:
		return target == backends.ErrNotAcquired || target == backends.ErrNotSent
	}
	return target == backends.ErrNotAcquired || target == backends.ErrRefused
}

func replyError(slot, op string, m message) error {
	return &CodeError{Slot: slot, Op: op, Code: *m.Code, Text: m.Text}
}

// Acquire implements backends.Lock.
func (l *Lock) Acquire(ctx context.Context, key string) (backends.Grant, error) {
	reply, err := l.call(ctx, request{Type: TypeAcquire, Key: key})
	if err != nil {
		return backends.Grant{}, err
	}
	g := backends.Grant{Token: *reply.Token, TTL: time.Duration(deref64(reply.TTLms)) * time.Millisecond}
	if l.Declaration().Supports.Fence {
		g.Fence = reply.Fence
	}
	g.Lost = reply.lost
	return g, nil
}

// Start implements backends.Starter: a program that died or was killed is
// started again, and its init answered, before the next request's invoke
// is recorded.
func (l *Lock) Start(context.Context) (time.Duration, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != nil && !l.cur.isDead() {
		return 0, nil
	}
	began := time.Now()
	if _, err := l.running(); err != nil {
		return 0, err
	}
	return time.Since(began), nil
}

// Release implements backends.Lock.
func (l *Lock) Release(ctx context.Context, key string, g backends.Grant) (bool, error) {
	reply, err := l.call(ctx, request{Type: TypeRelease, Key: key, Token: g.Token})
	if err != nil {
		return false, err
	}
	l.rmu.Lock()
	delete(l.lost, g.Token)
	l.rmu.Unlock()
	return *reply.Deleted, nil
}

// Extend implements backends.Lock, for a program that supports extend.
func (l *Lock) Extend(ctx context.Context, key string, g backends.Grant) (bool, error) {
	if !l.Declaration().Supports.Extend {
		return false, fmt.Errorf("client %s does not support extend (init_ok supports.extend)", l.opts.Slot)
	}
	reply, err := l.call(ctx, request{Type: TypeExtend, Key: key, Token: g.Token})
	if err != nil {
		return false, err
	}
	return *reply.Extended, nil
}

// Inspect implements backends.Lock, for a program that supports inspect.
func (l *Lock) Inspect(ctx context.Context, key string) (string, error) {
	if !l.Declaration().Supports.Inspect {
		return "", fmt.Errorf("client %s does not support inspect (init_ok supports.inspect)", l.opts.Slot)
	}
	reply, err := l.call(ctx, request{Type: TypeInspect, Key: key})
	if err != nil {
		return "", err
	}
	return *reply.State, nil
}

// Close closes the program's stdin and waits up to a second for it to
// exit, as the protocol asks; then it is killed. It reports a program
// that did not exit 0 in time (RuleEOF).
func (l *Lock) Close() error {
	l.mu.Lock()
	p := l.cur
	l.cur = nil
	l.mu.Unlock()
	var err error
	if p != nil {
		err = p.closeStdin(time.Second)
	}
	l.log.Close()
	return err
}

// deliver hands a report to the loop's function, off the reader's
// goroutine: the function may wait for an operation that waits for the
// reader.
func (l *Lock) deliver(m message) {
	r := backends.Report{Lost: m.Type == TypeLost, Key: *m.Key, Token: *m.Token, Why: m.Why, At: time.Now()}
	if m.TTLms != nil {
		r.TTL = time.Duration(*m.TTLms) * time.Millisecond
	}
	if m.SentNs != nil && m.Type == TypeRenewed {
		r.Sent = *m.SentNs
	}
	l.rmu.Lock()
	f := l.report
	if ch, ok := l.lost[r.Token]; ok && r.Lost {
		close(ch)
		delete(l.lost, r.Token)
	}
	l.rmu.Unlock()
	if f != nil {
		go f(r)
	}
}

// proc is one start of the program.
type proc struct {
	slot  string
	cmd   *exec.Cmd
	lock  *Lock
	wmu   sync.Mutex
	stdin io.WriteCloser

	mu      sync.Mutex
	want    int64 // the msg_id of the request outstanding, 0 for none
	err     error // why it is dead
	killed  bool
	parked  int
	replies chan message
	dead    chan struct{}
	exited  chan struct{}
	// parkChange is signalled when a failpoint parks or lets go.
	parkChange chan struct{}
}

type timeoutError struct{}

func (*timeoutError) Error() string { return "timeout" }

func (p *proc) expect(id int64) {
	p.mu.Lock()
	p.want = id
	p.mu.Unlock()
}

func (p *proc) isDead() bool {
	select {
	case <-p.dead:
		return true
	default:
		return false
	}
}

// exchange writes msg and waits for the reply to the outstanding request,
// timeout long or until ctx is done (a program that does not answer in
// time, or whose caller gave up, is killed), not
// counting the time the program waits at a failpoint
// (an operation of a built-in lock stopped at one does not run out
// either).
func (p *proc) exchange(ctx context.Context, msg any, timeout time.Duration) (message, error) {
	defer p.expect(0)
	if err := p.write(msg); err != nil {
		return message{}, err
	}
	// The request's own budget: time parked at a failpoint is not spent,
	// and nothing else (an unasked message) gives any back.
	left, since := timeout, time.Now()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	parked := p.parkedNow() > 0
	if parked {
		timer.Stop()
	}
	done := ctx.Done()
	for {
		select {
		case m := <-p.replies:
			return m, nil
		case <-p.dead:
			// A reply read just before the death still counts.
			select {
			case m := <-p.replies:
				return m, nil
			default:
			}
			return message{}, p.death()
		case <-done:
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				// The request's own timeout bounds it, suspended while the
				// program waits at a failpoint; a caller's deadline only
				// estimates that timeout. A cancelled caller (client
				// check's Ctrl-C) ends the wait.
				done = nil
				continue
			}
			p.kill()
			return message{}, fmt.Errorf("client %s: %w while waiting for the reply: outcome unknown; the client is killed", p.slot, context.Cause(ctx))
		case <-p.parkChange:
			now := p.parkedNow() > 0
			switch {
			case now && !parked:
				left -= time.Since(since)
				timer.Stop()
			case !now && parked:
				since = time.Now()
				timer.Reset(max(left, 0))
			}
			parked = now
		case <-timer.C:
			if p.parkedNow() == 0 {
				// Killed before the request stops being outstanding, so a
				// reply racing the timeout is no violation of its own.
				p.kill()
				return message{}, &timeoutError{}
			}
		}
	}
}

func (p *proc) parkedNow() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.parked
}

func (p *proc) write(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		if p.isDead() {
			return p.death()
		}
		return fmt.Errorf("client %s: writing to its stdin: %w", p.slot, err)
	}
	return nil
}

func (p *proc) death() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// fail marks the program dead for err and kills it, once.
func (p *proc) fail(err error) {
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return
	}
	p.err = err
	close(p.dead)
	p.mu.Unlock()
	spawn.KillCaged(p.cmd.Process.Pid)
}

// kill ends the program lockcheck gave up on (a timeout, a violation
// already reported).
func (p *proc) kill() {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	p.fail(fmt.Errorf("client %s was killed", p.slot))
}

// signal sends sig to the program and every process it started.
func (p *proc) signal(sig syscall.Signal) {
	pid := p.cmd.Process.Pid
	for _, d := range procstate.Descendants(pid) {
		syscall.Kill(d, sig) //nolint:errcheck // it may have exited meanwhile
	}
	syscall.Kill(pid, sig) //nolint:errcheck // it may have exited meanwhile
}

// stop stops the program and every process it started (SIGSTOP) and
// waits until each of their threads is stopped: the kernel stops a
// process's threads one by one, and on a loaded machine one can run on
// long enough to answer a request sent right after the signal.
func (p *proc) stop() {
	p.signal(syscall.SIGSTOP)
	pids := append(procstate.Descendants(p.cmd.Process.Pid), p.cmd.Process.Pid)
	for _, pid := range pids {
		procstate.WaitStopped(pid, 2*time.Second) //nolint:errcheck // a check that finds it running says so
	}
}

// read follows the program's stdout until it ends.
func (p *proc) read(stdout io.Reader) {
	r := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := readLine(r)
		if err != nil {
			if errors.Is(err, errLineTooLong) {
				p.violate(&Violation{Slot: p.slot, Line: cut(line), Rule: RuleJSON, Detail: "a line longer than 1 MiB"})
			}
			break
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		m, verr := parse(p.slot, line)
		if verr != nil {
			p.violate(verr)
			break
		}
		if !p.handle(m, line) {
			break
		}
	}
	<-p.exited
	p.mu.Lock()
	killed, inFlight := p.killed || p.err != nil, p.want != 0
	p.mu.Unlock()
	if !killed {
		err := &Violation{Slot: p.slot, Rule: RuleExit, Detail: "exited (" + p.cmd.ProcessState.String() + ")"}
		p.lock.broke(err)
		p.fail(err)
		if !inFlight {
			// No operation learns of it: the next one does.
			p.lock.diedOnItsOwn(p, err)
		}
	}
}

// diedOnItsOwn records that p died unasked, for the next operation.
func (l *Lock) diedOnItsOwn(p *proc, err error) {
	go func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.cur == p {
			l.died, l.cur = err, nil
		}
	}()
}

// violate ends the program for breaking v's rule and records it.
func (p *proc) violate(v *Violation) {
	p.lock.broke(v)
	p.fail(v)
}

// handle acts on one message; false ends the program.
func (p *proc) handle(m message, line string) bool {
	if m.isReply() {
		p.mu.Lock()
		ok := p.want != 0 && *m.InReplyTo == p.want
		if ok {
			p.want = 0
		}
		p.mu.Unlock()
		if !ok && p.isDead() {
			return false // a reply after the timeout, to a program already killed for it
		}
		if !ok {
			p.violate(&Violation{Slot: p.slot, Line: cut(line), Rule: RuleReply, Detail: fmt.Sprintf("%s in reply to %d, which is no request outstanding", m.Type, *m.InReplyTo)})
			return false
		}
		if m.Type == TypeAcquire+replySuffix {
			p.lock.granted(&m)
		}
		p.replies <- m
		return true
	}
	switch m.Type {
	case TypeFailpoint:
		if !slices.Contains(p.lock.opts.Failpoints, *m.Name) {
			// docs/clients.md: only for the names init aimed at. One sent
			// anyway (a flood of them) is a break, not a pause.
			p.violate(&Violation{Slot: p.slot, Line: cut(line), Rule: RuleAimed, Detail: fmt.Sprintf("failpoint %q, which init did not aim at", *m.Name)})
			return false
		}
		go p.failpoint(*m.Name, *m.MsgID)
	case TypeRenewed, TypeLost:
		p.lock.deliver(m)
	}
	return true
}

// failpoint stops the program's thread at name until the run lets it go.
func (p *proc) failpoint(name string, id int64) {
	p.setParked(+1)
	p.lock.opts.Failpoint.Hit(name)
	p.setParked(-1)
	p.write(request{Type: TypeFailpointOK, InReplyTo: id}) //nolint:errcheck // a dead program learns nothing
}

func (p *proc) setParked(d int) {
	p.mu.Lock()
	p.parked += d
	p.mu.Unlock()
	select {
	case p.parkChange <- struct{}{}:
	default:
	}
}

// reap waits for the program's exit.
func (p *proc) reap() {
	p.cmd.Wait() //nolint:errcheck // its status is in ProcessState
	close(p.exited)
}

// closeStdin ends the program as the protocol asks (EOF on stdin), killing
// it after wait.
func (p *proc) closeStdin(wait time.Duration) error {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	p.wmu.Lock()
	p.stdin.Close()
	p.wmu.Unlock()
	select {
	case <-p.exited:
		if !p.cmd.ProcessState.Success() && !p.isDead() {
			return &Violation{Slot: p.slot, Rule: RuleEOF, Detail: "exited " + p.cmd.ProcessState.String() + " on EOF of stdin"}
		}
		return nil
	case <-time.After(wait):
		p.fail(fmt.Errorf("client %s did not exit on EOF", p.slot))
		<-p.exited
		return &Violation{Slot: p.slot, Rule: RuleEOF, Detail: fmt.Sprintf("still running %s after EOF of stdin; killed", wait)}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line of at most maxLine bytes.
func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, err := r.ReadSlice('\n')
		b = append(b, chunk...)
		if len(b) > maxLine {
			return string(b[:lineInViolations]), errLineTooLong
		}
		switch {
		case err == nil:
			return strings.TrimRight(string(b), "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(b) > 0:
			return string(b), nil
		default:
			return "", err
		}
	}
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func deref64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
