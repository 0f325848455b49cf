package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"unicode/utf8"
)

// Writer appends events to a history file, one line each, flushed as they
// come so that a run killed half-way leaves a checkable prefix. It is safe
// for concurrent use and numbers events in the order it writes them.
type Writer struct {
	mu    sync.Mutex
	f     io.WriteCloser
	buf   *bufio.Writer
	line  bytes.Buffer // the event being written
	enc   *json.Encoder
	next  int64
	err   error
	count int64
}

// Create creates path and writes the header line.
func Create(path string, h Header) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return NewWriter(f, h)
}

// NewWriter writes a history to f, starting with the header line; the
// Writer closes f. Tests pass a writer that fails, as a full disk does.
func NewWriter(f io.WriteCloser, h Header) (*Writer, error) {
	w := &Writer{f: f, buf: bufio.NewWriterSize(f, 64<<10)}
	w.enc = json.NewEncoder(&w.line)
	h.Version = SchemaVersion
	if err := w.enc.Encode(h); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := w.line.WriteTo(w.buf); err != nil {
		f.Close()
		return nil, err
	}
	if err := w.buf.Flush(); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// Append numbers e, writes it and flushes it. It returns the event as
// written. After the first write error every later call returns that error.
func (w *Writer) Append(e Event) (Event, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return e, w.err
	}
	e.Index = w.next
	w.next++
	if err := w.encode(&e); err != nil {
		w.err = err
		return e, err
	}
	if _, err := w.line.WriteTo(w.buf); err != nil {
		w.err = err
		return e, err
	}
	if err := w.buf.Flush(); err != nil {
		w.err = err
		return e, err
	}
	w.count++
	return e, nil
}

// maxText bounds the free text of an event (its error and detail) when
// the event would be over MaxLine: the text of a lock client program's
// error can be nearly a MiB, and escaped it grows.
const maxText = 64 << 10

// encode encodes e into w.line, as one line of at most MaxLine: a history
// lockcheck writes is one it reads. Its free text is shortened to do so; an
// event still too long (a token of nearly a MiB) is an error, which ends
// the recording, rather than a line every reader refuses.
func (w *Writer) encode(e *Event) error {
	w.line.Reset()
	if err := w.enc.Encode(e); err != nil || w.line.Len() <= MaxLine+1 {
		return err
	}
	e.Error = cutText(e.Error)
	if e.Value != nil {
		v := *e.Value
		v.Detail = cutText(v.Detail)
		e.Value = &v
	}
	w.line.Reset()
	if err := w.enc.Encode(e); err != nil {
		return err
	}
	if w.line.Len() > MaxLine+1 {
		w.line.Reset()
		return fmt.Errorf("event %d (%s %s of process %s) is over %d bytes (1 MiB) with its error and detail shortened, the longest line a history may hold", e.Index, e.Type, e.F, e.Process, MaxLine)
	}
	return nil
}

// cutText is s cut to maxText bytes, at a character's start, saying how
// much it left out.
func cutText(s string) string {
	if len(s) <= maxText {
		return s
	}
	n := maxText
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s... (%d bytes cut)", s[:n], len(s)-n)
}

// Close flushes and closes the file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return w.err
	}
	err := w.buf.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	if w.err == nil {
		w.err = errors.New("history writer closed")
	}
	return err
}

// History is a parsed history file.
type History struct {
	Header Header
	Events []Event
	// Truncated is set when the last line was cut off mid-write (a run that
	// was killed); that line is dropped and the prefix is still checkable.
	Truncated bool
	// Excerpt is set when Events hold only part of a long history, read
	// for its report: the nemesis events and the stretches around what the
	// checker found.
	Excerpt *Excerpt
}

// Excerpt says what a History that holds part of a long history left out.
type Excerpt struct {
	Length int // events in the whole history
	// Operations are a sample of the whole history's client operations,
	// for latency figures: an invoke and its completion each, one in
	// Stride, in order (values left out).
	Operations []Event
	Stride     int
	Operated   int // client operations that completed, sampled or not
}

// Length is the number of events in the whole history.
func (h *History) Length() int {
	if h.Excerpt != nil {
		return h.Excerpt.Length
	}
	return len(h.Events)
}

// ParseError names the file, line and rule of a history or resource log
// that the model refuses. No verdict is drawn from such a file.
type ParseError struct {
	// File is the path read, or empty for a reader that is not a file (the
	// message then says "history" or "resource log").
	File string
	Line int
	Err  error
	// resource marks an error of the resource log rather than the history.
	resource bool
}

func (e *ParseError) Error() string {
	file := e.File
	if file == "" {
		file = "history"
		if e.resource {
			file = "resource log"
		}
	}
	return fmt.Sprintf("%s line %d: %v", file, e.Line, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// ReadFile reads and validates a history file.
func ReadFile(path string) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var events int
	if fi, err := f.Stat(); err == nil {
		events = int(fi.Size() / bytesPerEvent)
	}
	h, err := read(f, events)
	if pe := (*ParseError)(nil); errors.As(err, &pe) {
		pe.File = path
	}
	return h, err
}

// bytesPerEvent is shorter than nearly every event line of a recorded
// history (the shortest of a real Redis run's are some 90 bytes), so a
// file's size over it is room for its events: holding them in one slice
// from the start saves the copies of growing it, which were half of
// reading a real run's history.
const bytesPerEvent = 80

// Read reads and validates a history: a header line, then events that carry
// every required field, whose indices rise, whose types and functions are
// known, and that follow the process rules of docs/history.md: each invoke is
// followed by exactly one completion of the same process, not timed before
// it, and a process whose operation completed with info never acts again.
// A last line cut off mid-write is dropped and noted in Truncated.
func Read(r io.Reader) (*History, error) { return read(r, 0) }

// read is Read with room for events events.
func read(r io.Reader, events int) (*History, error) {
	h := &History{Events: make([]Event, 0, events)}
	truncated, err := Stream(r, func(hd Header) error {
		h.Header = hd
		return nil
	}, func(e *Event) error {
		h.Events = append(h.Events, *e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	h.Truncated = truncated
	return h, nil
}

// Stream reads and validates a history as Read does, one line at a time:
// header is called once with the header line, then event with each event
// in order (valid until event returns; the streaming checker keeps none).
// Memory stays flat whatever the length of the history. An error of a
// callback stops the reading and is returned as the error of that line.
func Stream(r io.Reader, header func(Header) error, event func(*Event) error) (truncated bool, err error) {
	return StreamAt(r, header, func(e *Event, _ int64) error { return event(e) })
}

// StreamAt is Stream, telling event where each event's line begins in r
// (its offset in bytes), so that a reader can come back for a stretch of
// the history (SkimEvents) without reading all of it again.
func StreamAt(r io.Reader, header func(Header) error, event func(e *Event, offset int64) error) (truncated bool, err error) {
	size := 1 << 20
	if l, ok := r.(interface{ Len() int }); ok {
		// A history in memory (a test's) needs no buffer larger than itself.
		size = min(size, l.Len()+1)
	}
	var at int64
	lines := NewEventLines(header, func(e *Event) error { return event(e, at) })
	truncated, err = eachLineAt(r, size, false, func(line int, offset int64, b []byte) error {
		at = offset
		return lines.Line(line, b)
	})
	if err != nil {
		return false, err
	}
	if !lines.headerRead {
		return false, &ParseError{Line: 1, Err: errors.New("empty history: no header line")}
	}
	return truncated, nil
}

// EventLines reads a history one line at a time, as Stream does, carrying
// its rules from line to line: for a history followed as it is written.
type EventLines struct {
	header     func(Header) error
	event      func(*Event) error
	v          validator
	dec        *eventDecoder
	headerRead bool
	e          Event // one for all lines: event must copy what it keeps
}

// NewEventLines reads lines with the callbacks of Stream.
func NewEventLines(header func(Header) error, event func(*Event) error) *EventLines {
	return &EventLines{header: header, event: event, v: validator{procs: map[Process]procRule{}, lastIndex: -1}, dec: newEventDecoder()}
}

// Line takes line number n, b, which is not blank.
func (l *EventLines) Line(n int, b []byte) error {
	if !l.headerRead {
		l.headerRead = true
		if n != 1 {
			return &ParseError{Line: 1, Err: errors.New("empty line where the header was expected")}
		}
		var hd Header
		if err := decodeHeader(b, &hd); err != nil {
			return err
		}
		return l.header(hd)
	}
	l.e = Event{Index: absent, Time: absent, Process: noProcess}
	if err := l.dec.decode(b, &l.e); err != nil {
		return notJSON{err}
	}
	if err := l.v.check(&l.e); err != nil {
		return err
	}
	return l.event(&l.e)
}

// notJSON marks a line that is not the JSON it should be: on a last line
// with no newline, the mark of a run killed mid-write.
type notJSON struct{ error }

// eachLine calls visit with the number and the text of each line of r that
// is not blank. A last line with no newline that visit finds is not JSON
// ends the reading, truncated; any other error of visit stops it as a
// ParseError of that line (of the resource log when resource is set).
func eachLine(r io.Reader, size int, resource bool, visit func(line int, b []byte) error) (truncated bool, err error) {
	return eachLineAt(r, size, resource, func(line int, _ int64, b []byte) error { return visit(line, b) })
}

// eachLineAt is eachLine, telling visit the offset in r where each line
// begins.
func eachLineAt(r io.Reader, size int, resource bool, visit func(line int, offset int64, b []byte) error) (truncated bool, err error) {
	br := bufio.NewReaderSize(r, size)
	var long []byte
	var offset int64
	for line := 1; ; line++ {
		b, complete, err := readLine(br, &long)
		if errors.Is(err, errLineTooLong) {
			return false, &ParseError{Line: line, Err: err, resource: resource}
		}
		if err != nil {
			return false, err
		}
		at := offset
		offset += int64(len(b)) // with its newline
		if b = bytes.TrimSpace(b); len(b) > 0 {
			if err := visit(line, at, b); err != nil {
				return lineError(err, line, complete, resource)
			}
		}
		if !complete {
			return false, nil
		}
	}
}

// lineError is how eachLine ends on visit's error err at line.
func lineError(err error, line int, complete, resource bool) (truncated bool, _ error) {
	var cut notJSON
	switch {
	case errors.As(err, &cut) && !complete:
		return true, nil
	case errors.As(err, new(*ParseError)):
		return false, err
	case errors.As(err, &cut):
		err = cut.error
	}
	return false, &ParseError{Line: line, Err: err, resource: resource}
}

// MaxLine is the longest line, in bytes without its newline, a history or
// resource log may hold: the 1 MiB the client protocol allows a line
// (docs/clients.md), where the longest event Writer writes is a few KiB. A
// longer line is refused before more of it is read, so that a hostile or
// broken file cannot take the memory of the machine that checks it.
const MaxLine = 1 << 20

// errLineTooLong is the error of a line over MaxLine.
var errLineTooLong = fmt.Errorf("over %d bytes (1 MiB), the longest line a history or resource log may hold (docs/history.md); cut the file before this line, or split what the line holds over smaller events", MaxLine)

// readLine reads the next line with its newline; complete is false for a
// last line with no newline (or none at all). The line is valid until the
// next call: it lies in br's buffer, or in *long for a line longer than
// that buffer. A line over MaxLine is errLineTooLong, with no more of it read
// than MaxLine and a buffer.
func readLine(br *bufio.Reader, long *[]byte) (line []byte, complete bool, err error) {
	b, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		*long = append((*long)[:0], b...)
		for err == bufio.ErrBufferFull && len(*long) <= MaxLine+1 {
			b, err = br.ReadSlice('\n')
			*long = append(*long, b...)
		}
		b = *long
	}
	if len(bytes.TrimSuffix(b, []byte{'\n'})) > MaxLine {
		return nil, false, errLineTooLong
	}
	switch err {
	case nil:
		return b, true, nil
	case io.EOF:
		return b, false, nil
	}
	return nil, false, err
}

func decodeHeader(b []byte, hd *Header) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return fmt.Errorf("header is not a JSON object: %v", err)
	}
	if _, ok := probe["lockcheck_history"]; !ok {
		return errors.New(`the first line must be a header with "lockcheck_history": <schema version>`)
	}
	if err := json.Unmarshal(b, hd); err != nil {
		return fmt.Errorf("header: %v", err)
	}
	if hd.Version < 1 || hd.Version > SchemaVersion {
		return fmt.Errorf("history schema version %d is not supported (this lockcheck reads 1 to %d)", hd.Version, SchemaVersion)
	}
	return nil
}

// absent and noProcess fill an event's required fields before it is
// decoded: a field still holding one after decoding was missing (or null),
// which a zero value could not tell.
const (
	absent    int64   = math.MinInt64
	noProcess Process = -2
)

// procRule is what the process rules need to know of one client process.
type procRule struct {
	pending  string // f of its pending invoke, "" when none
	invoked  int64  // time of that invoke
	retired  bool   // an operation of it completed with info
	retireAt int64  // index of that info completion
}

// validator applies the per-event rules in history order.
type validator struct {
	procs     map[Process]procRule
	lastIndex int64
}

// clientFunctions are the functions of client operations.
var clientFunctions = map[string]bool{FAcquire: true, FRelease: true, FExtend: true, FRead: true, FWrite: true}

func (v *validator) check(e *Event) error {
	switch {
	case e.Index == absent:
		return errors.New(`missing "index" (every event needs one, rising line by line)`)
	case e.Time == absent:
		return errors.New(`missing "time" (nanoseconds on CLOCK_MONOTONIC; 0 is a time, absence is not)`)
	case e.Process == noProcess:
		return errors.New(`missing "process" (a client process number, or "nemesis")`)
	case e.Type == "":
		return errors.New(`missing "type" (invoke, ok, fail or info)`)
	case e.F == "":
		return errors.New(`missing "f"`)
	case e.Index == v.lastIndex:
		return fmt.Errorf("duplicate index %d (each event has its own index)", e.Index)
	case e.Index < v.lastIndex:
		return fmt.Errorf("index %d does not rise (previous %d)", e.Index, v.lastIndex)
	}
	switch e.Type {
	case Invoke, OK, Fail, Info:
	default:
		return fmt.Errorf("unknown type %q (want invoke, ok, fail or info)", e.Type)
	}
	v.lastIndex = e.Index
	if e.Process == Nemesis {
		// Unknown nemesis verbs are accepted on purpose: a newer lockcheck
		// adds faults, and a fault only explains a verdict, it never
		// changes a client's lease (docs/history.md).
		if e.Type != Info {
			return fmt.Errorf("the nemesis records info events, not invokes or %s (nemesis events must be info)", e.Type)
		}
		return nil
	}
	if !clientFunctions[e.F] {
		return fmt.Errorf("unknown f %q for a client operation (want acquire, release, extend, read or write)", e.F)
	}
	p := v.procs[e.Process]
	if p.retired {
		return fmt.Errorf("process %d acts after its operation completed with info at index %d (a process that got info is retired and never acts again; use a new process number)", e.Process, p.retireAt)
	}
	if e.Type == Invoke {
		if p.pending != "" {
			return fmt.Errorf("process %d invokes %s while its %s is still pending (one operation at a time per process)", e.Process, e.F, p.pending)
		}
		v.procs[e.Process] = procRule{pending: e.F, invoked: e.Time}
		return nil
	}
	switch {
	case p.pending == "":
		return fmt.Errorf("%s of %s by process %d has no pending invoke (each invoke has exactly one completion, after it)", e.Type, e.F, e.Process)
	case p.pending != e.F:
		return fmt.Errorf("process %d completes %s but invoked %s", e.Process, e.F, p.pending)
	case e.Time < p.invoked:
		return fmt.Errorf("%s of %s by process %d at time %d is before its invoke at %d (a completion cannot precede its invoke)", e.Type, e.F, e.Process, e.Time, p.invoked)
	}
	p = procRule{}
	if e.Type == Info {
		p = procRule{retired: true, retireAt: e.Index}
	}
	v.procs[e.Process] = p
	return nil
}
