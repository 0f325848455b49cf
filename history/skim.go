package history

import (
	"errors"
	"io"
)

// Head is what an event line says first, read without decoding the rest:
// enough to place the event in time and pair an operation.
type Head struct {
	Time    int64
	Process Process
	Type    Type
	F       string
}

// Skim reads a history a second time, for what it shows rather than for
// its verdict (the report of a long run): header is called with the header,
// then visit with each event's head and a decode that decodes the whole
// event when it is wanted (valid until visit returns). Lines of the shape
// Writer writes are skimmed; any other line is decoded, and refused as
// Stream refuses it. The rules Stream holds across lines are not checked
// again.
func Skim(r io.Reader, header func(Header) error, visit func(h Head, decode func() (*Event, error)) error) (truncated bool, err error) {
	headerRead := false
	truncated, err = skim(r, func(b []byte) (bool, error) {
		if headerRead {
			return false, nil
		}
		headerRead = true
		var hd Header
		if err := decodeHeader(b, &hd); err != nil {
			return true, err
		}
		return true, header(hd)
	}, visit)
	if err == nil && !headerRead {
		err = &ParseError{Line: 1, Err: errors.New("empty history: no header line")}
	}
	return truncated, err
}

// SkimEvents is Skim of a stretch of a history's event lines, with no
// header: r starts at an event's line (an offset StreamAt told).
func SkimEvents(r io.Reader, visit func(h Head, decode func() (*Event, error)) error) (truncated bool, err error) {
	return skim(r, func([]byte) (bool, error) { return false, nil }, visit)
}

// skim visits the event lines of r; header takes a line first and says
// whether it was the header.
func skim(r io.Reader, header func(b []byte) (bool, error), visit func(h Head, decode func() (*Event, error)) error) (truncated bool, err error) {
	dec := newEventDecoder()
	var line []byte
	var e Event
	decode := func() (*Event, error) {
		e = Event{Index: absent, Time: absent, Process: noProcess}
		if err := dec.decode(line, &e); err != nil {
			return nil, notJSON{err}
		}
		return &e, nil
	}
	return eachLine(r, 1<<20, false, func(_ int, b []byte) error {
		if was, err := header(b); was || err != nil {
			return err
		}
		line = b
		if h, ok := dec.head(b); ok {
			return visit(h, decode)
		}
		ev, err := decode()
		if err != nil {
			return err
		}
		return visit(Head{Time: ev.Time, Process: ev.Process, Type: ev.Type, F: ev.F}, decode)
	})
}

// head reads the head of a line that starts as Writer writes it:
// {"index":N,"time":T,"process":P,"type":"X","f":"Y" ...
func (d *eventDecoder) head(b []byte) (Head, bool) {
	c := &cursor{b: b}
	var h Head
	ok := c.eatWord(`{"index":`)
	if _, n := c.int(); !ok || !n {
		return h, false
	}
	if !c.eatWord(`,"time":`) {
		return h, false
	}
	h.Time, ok = c.int()
	if !ok || !c.eatWord(`,"process":`) {
		return h, false
	}
	var e Event
	if !d.process(c, &e) || !c.eatWord(`,"type":`) {
		return h, false
	}
	h.Process = e.Process
	t, ok := c.str()
	if !ok || !c.eatWord(`,"f":`) {
		return h, false
	}
	f, ok := c.str()
	h.Type, h.F = Type(d.intern(t)), d.intern(f)
	return h, ok
}
