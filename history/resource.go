package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// ResourceEntry is one line of resource.jsonl, the protected resource's own
// serial log of every write it accepted or refused. It is ground truth: a
// write whose client timed out still appears here if it landed.
type ResourceEntry struct {
	Seq      int64   `json:"seq"`
	Time     int64   `json:"time"` // CLOCK_MONOTONIC ns when the write was applied or refused
	Key      string  `json:"key"`
	Process  Process `json:"process"`
	Req      string  `json:"req"`
	Fence    *int64  `json:"fence,omitempty"`
	Read     int64   `json:"read"`  // the value the client computed its write from
	Value    int64   `json:"value"` // the value it asked to write
	Prev     int64   `json:"prev"`  // the value the resource held before
	Accepted bool    `json:"accepted"`
	Reason   string  `json:"reason,omitempty"` // why a write was refused
}

// ResourceLog is a parsed resource.jsonl.
type ResourceLog struct {
	// Entries is never nil for a log that exists, even an empty one: an
	// existing log is ground truth, and a write absent from it never
	// happened.
	Entries []ResourceEntry
	// Truncated is set when the last line was cut off mid-write (a run that
	// was killed); that line is dropped and the prefix is still checkable.
	Truncated bool
}

// ReadResourceLog reads resource.jsonl. A line cut off by a killed run ends
// the log without an error; ReadResource also says whether that happened.
func ReadResourceLog(path string) ([]ResourceEntry, error) {
	l, err := ReadResource(path)
	if err != nil {
		return nil, err
	}
	return l.Entries, nil
}

// ReadResource reads and validates resource.jsonl: every line carries
// seq, time, key, process, read, value, prev and accepted, and seq rises.
// A last line cut off mid-write is dropped and noted in Truncated.
func ReadResource(path string) (*ResourceLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	l, err := readResource(f)
	if pe := (*ParseError)(nil); errors.As(err, &pe) {
		pe.File = path
	}
	return l, err
}

func readResource(r io.Reader) (*ResourceLog, error) {
	l := &ResourceLog{Entries: []ResourceEntry{}}
	truncated, err := StreamResource(r, func(e *ResourceEntry) error {
		l.Entries = append(l.Entries, *e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	l.Truncated = truncated
	return l, nil
}

// StreamResource reads and validates a resource log as ReadResource does,
// one line at a time, calling visit with each entry (valid until visit
// returns). truncated says the last line was cut off mid-write and dropped.
func StreamResource(r io.Reader, visit func(*ResourceEntry) error) (truncated bool, err error) {
	lines := NewResourceLines(visit)
	return eachLine(r, 64<<10, true, lines.Line)
}

// ResourceLines reads a resource log one line at a time, as StreamResource
// does, carrying its rules from line to line: for a log followed as it is
// written.
type ResourceLines struct {
	visit   func(*ResourceEntry) error
	lastSeq int64
	dec     *eventDecoder
}

// NewResourceLines reads lines with StreamResource's callback.
func NewResourceLines(visit func(*ResourceEntry) error) *ResourceLines {
	return &ResourceLines{visit: visit, lastSeq: absent, dec: newEventDecoder()}
}

// Line takes a line that is not blank.
func (l *ResourceLines) Line(_ int, b []byte) error {
	blank := resourceLine{ResourceEntry: ResourceEntry{Seq: absent, Time: absent, Process: noProcess, Read: absent, Value: absent, Prev: absent}}
	w := blank
	if !l.dec.resource(b, &w) {
		w = blank
		if err := json.Unmarshal(b, &w); err != nil {
			return notJSON{err}
		}
	}
	if err := w.check(l.lastSeq); err != nil {
		return err
	}
	w.ResourceEntry.Accepted = w.Accepted.value
	l.lastSeq = w.Seq
	return l.visit(&w.ResourceEntry)
}

// resourceLine decodes one line and tells which required fields it lacked.
type resourceLine struct {
	ResourceEntry
	Accepted presentBool `json:"accepted"`
}

// presentBool is a bool that remembers whether it was decoded.
type presentBool struct{ value, set bool }

func (b *presentBool) UnmarshalJSON(raw []byte) error {
	v, err := strconv.ParseBool(string(raw))
	if err != nil {
		return fmt.Errorf("accepted must be true or false, got %s", raw)
	}
	b.value, b.set = v, true
	return nil
}

func (w *resourceLine) check(lastSeq int64) error {
	missing := func(field, why string) error { return fmt.Errorf("missing %q (%s)", field, why) }
	switch {
	case w.Seq == absent:
		return missing("seq", "the resource's serial number of the write")
	case w.Time == absent:
		return missing("time", "nanoseconds on CLOCK_MONOTONIC")
	case w.Key == "":
		return missing("key", "the resource key written")
	case w.Process == noProcess:
		return missing("process", "the client process that wrote")
	case w.Process == Nemesis:
		return errors.New(`process "nemesis" does not write to the resource`)
	case w.Read == absent:
		return missing("read", "the value the write was computed from")
	case w.Value == absent:
		return missing("value", "the value written")
	case w.Prev == absent:
		return missing("prev", "the value the resource held before")
	case !w.Accepted.set:
		return missing("accepted", "whether the resource took the write")
	case lastSeq != absent && w.Seq == lastSeq:
		return fmt.Errorf("duplicate seq %d (each write has its own)", w.Seq)
	case lastSeq != absent && w.Seq < lastSeq:
		return fmt.Errorf("seq %d does not rise (previous %d)", w.Seq, lastSeq)
	}
	return nil
}
