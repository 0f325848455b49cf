package history

import (
	"bytes"
	"io"
	"os"
)

// Tail reads the lines appended to a file since its last read: a history
// or resource log while it is written. A line not ended yet waits for the
// next read, so each line is read once, whole.
type Tail struct {
	f        *os.File
	resource bool   // the file is a resource log, for errors
	pending  []byte // the start of a line still being written
	line     int
	buf      []byte
}

// OpenTail starts reading the file at path from its beginning; resource
// says it is a resource log.
func OpenTail(path string, resource bool) (*Tail, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &Tail{f: f, resource: resource, buf: make([]byte, 256<<10)}, nil
}

// Lines calls visit with the number and text of each complete line written
// since the last call that is not blank; an error of visit stops it as a
// ParseError of that line, and the tail is not read further.
func (t *Tail) Lines(visit func(line int, b []byte) error) error {
	for {
		n, err := t.f.Read(t.buf)
		t.pending = append(t.pending, t.buf[:n]...)
		for {
			i := bytes.IndexByte(t.pending, '\n')
			if i < 0 {
				break
			}
			t.line++
			if i > MaxLine {
				return &ParseError{Line: t.line, Err: errLineTooLong, resource: t.resource}
			}
			if b := bytes.TrimSpace(t.pending[:i]); len(b) > 0 {
				if err := visit(t.line, b); err != nil {
					_, err = lineError(err, t.line, true, t.resource)
					return err
				}
			}
			t.pending = t.pending[i+1:]
		}
		if len(t.pending) > MaxLine {
			// A line being written may grow no further than a line read.
			return &ParseError{Line: t.line + 1, Err: errLineTooLong, resource: t.resource}
		}
		t.pending = append([]byte(nil), t.pending...) // let the read lines go
		if err == io.EOF || n == 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Close closes the file.
func (t *Tail) Close() error { return t.f.Close() }
