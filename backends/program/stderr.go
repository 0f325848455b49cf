package program

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
)

// StderrKeep is how much of a program's stderr its log keeps from the
// start, and again from the end: a program that writes gigabytes fills no
// disk, and both its start and its last words stay.
const StderrKeep = 1 << 20

// stderrLog is the bounded log of a program's stderr, over all its starts.
type stderrLog struct {
	mu     sync.Mutex
	f      *os.File // nil: discard
	head   int64    // bytes written to f so far
	tail   []byte   // a ring of the last StderrKeep bytes past the head
	at     int      // the ring's next write
	full   bool     // the ring has wrapped
	cutOff int64    // bytes past the head, kept in the ring or dropped
	closed bool
	// line is the end of what the program wrote since its latest start,
	// for lastLine: the line being written, and the one before it.
	line, prev []byte
}

// lineKeep bounds the last line kept for a message.
const lineKeep = 300

func openStderrLog(path string) (*stderrLog, error) {
	l := &stderrLog{}
	if path == "" {
		return l, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	l.f = f
	return l, nil
}

// copy keeps what r gives until it ends.
func (l *stderrLog) copy(r io.Reader) {
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			l.write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

func (l *stderrLog) write(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keepLine(b)
	if room := StderrKeep - l.head; room > 0 {
		n := min(int64(len(b)), room)
		if l.f != nil && !l.closed {
			l.f.Write(b[:n]) //nolint:errcheck // a log that cannot be written loses lines, not the run
		}
		l.head += n
		b = b[n:]
	}
	if len(b) == 0 {
		return
	}
	if l.tail == nil {
		l.tail = make([]byte, StderrKeep)
	}
	l.cutOff += int64(len(b))
	for len(b) > 0 {
		n := copy(l.tail[l.at:], b)
		l.at += n
		b = b[n:]
		if l.at == len(l.tail) {
			l.at, l.full = 0, true
		}
	}
}

// note adds a line of lockcheck's own to the log.
func (l *stderrLog) note(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil && !l.closed {
		fmt.Fprintf(l.f, "lockcheck: %s\n", line)
	}
}

// total is every byte the program wrote.
func (l *stderrLog) total() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head + l.cutOff
}

// Close writes the kept end of a long stderr and closes the file.
func (l *stderrLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.f == nil {
		l.closed = true
		return nil
	}
	l.closed = true
	if l.cutOff > 0 {
		kept := l.tail[:l.at]
		if l.full {
			kept = append(append([]byte{}, l.tail[l.at:]...), l.tail[:l.at]...)
		}
		fmt.Fprintf(l.f, "\nlockcheck: [%d bytes of stderr cut; the last %d follow]\n", l.cutOff-int64(len(kept)), len(kept))
		l.f.Write(kept) //nolint:errcheck
	}
	return l.f.Close()
}

// keepLine follows the last line of b. l.mu is held.
func (l *stderrLog) keepLine(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			l.line = appendKept(l.line, b)
			return
		}
		if l.line = appendKept(l.line, b[:i]); len(bytes.TrimSpace(l.line)) > 0 {
			l.prev, l.line = l.line, nil
		} else {
			l.line = l.line[:0]
		}
		b = b[i+1:]
	}
}

func appendKept(line, b []byte) []byte {
	return append(line, b[:min(len(b), max(0, lineKeep-len(line)))]...)
}

// restart forgets the last line: what a new start of the program writes
// is its own.
func (l *stderrLog) restart() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.line, l.prev = nil, nil
}

// lastLine is the last line the program wrote to its stderr since its
// latest start that is not blank ("" if none): for a program that could
// not start (a missing module), the one line its user needs.
func (l *stderrLog) lastLine() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := bytes.TrimSpace(l.line); len(t) > 0 {
		return string(t)
	}
	return string(bytes.TrimSpace(l.prev))
}
