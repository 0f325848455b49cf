package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// Writer appends events to a history file, one line each, flushed as they
// come so that a run killed half-way leaves a checkable prefix. It is safe
// for concurrent use and numbers events in the order it writes them.
type Writer struct {
	mu    sync.Mutex
	f     io.WriteCloser
	buf   *bufio.Writer
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
	w.enc = json.NewEncoder(w.buf)
	h.Version = SchemaVersion
	if err := w.enc.Encode(h); err != nil {
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
	if err := w.enc.Encode(e); err != nil {
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
}

// ParseError names the line of a history that could not be read.
type ParseError struct {
	Line int
	Err  error
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("history line %d: %v", e.Line, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// ReadFile reads and validates a history file.
func ReadFile(path string) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}

// Read reads and validates a history: a header line, then events whose
// indices rise, whose types are known, and whose completions follow an
// invoke of the same process.
func Read(r io.Reader) (*History, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	h := &History{}
	open := map[Process]string{} // process -> f of its pending invoke
	var lastIndex int64 = -1
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, err
		}
		complete := err == nil
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			if !complete {
				break
			}
			if line == 1 {
				return nil, &ParseError{line, errors.New("empty line where the header was expected")}
			}
			continue
		}
		if line == 1 {
			if err := decodeHeader(b, &h.Header); err != nil {
				return nil, &ParseError{line, err}
			}
			if !complete {
				break
			}
			continue
		}
		var e Event
		if derr := json.Unmarshal(b, &e); derr != nil {
			if !complete {
				h.Truncated = true
				break
			}
			return nil, &ParseError{line, derr}
		}
		if verr := validate(&e, lastIndex, open); verr != nil {
			return nil, &ParseError{line, verr}
		}
		lastIndex = e.Index
		h.Events = append(h.Events, e)
		if !complete {
			break
		}
	}
	if len(h.Events) == 0 && h.Header.Version == 0 {
		return nil, &ParseError{1, errors.New("empty history: no header line")}
	}
	return h, nil
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

func validate(e *Event, lastIndex int64, open map[Process]string) error {
	if e.Index <= lastIndex {
		return fmt.Errorf("index %d does not rise (previous %d)", e.Index, lastIndex)
	}
	if e.F == "" {
		return errors.New(`missing "f"`)
	}
	switch e.Type {
	case Invoke:
		if e.Process == Nemesis {
			return errors.New("the nemesis records info events, not invokes")
		}
		if f, ok := open[e.Process]; ok {
			return fmt.Errorf("process %d invokes %s while its %s is still pending", e.Process, e.F, f)
		}
		open[e.Process] = e.F
	case OK, Fail, Info:
		if e.Process == Nemesis {
			if e.Type != Info {
				return fmt.Errorf("nemesis events must be info, got %s", e.Type)
			}
			return nil
		}
		f, ok := open[e.Process]
		if !ok {
			return fmt.Errorf("%s of %s by process %d has no pending invoke", e.Type, e.F, e.Process)
		}
		if f != e.F {
			return fmt.Errorf("process %d completes %s but invoked %s", e.Process, e.F, f)
		}
		delete(open, e.Process)
	default:
		return fmt.Errorf("unknown type %q (want invoke, ok, fail or info)", e.Type)
	}
	return nil
}
