package history

import (
	"encoding/json"
	"math"
)

// eventDecoder decodes event lines. Most lines are exactly what Writer
// writes (compact, keys of the Event and Value fields, plain ASCII strings
// and integers), and a hand-written scanner decodes those several times
// faster than encoding/json. Any line outside that shape, including every
// malformed one, goes to encoding/json instead, so the reader accepts and
// refuses exactly what it did before, with the same messages: the scanner
// only ever answers for lines whose meaning it is certain of.
type eventDecoder struct {
	// strings interns the keys, types, functions and targets seen, so that
	// a million events do not hold a million copies of "acquire".
	strings map[string]string
	last    string // the latest string interned through the table: a run's one key
}

// maxInterned bounds the interned strings; a history of unusual values
// (tokens, request ids) must not make the table grow with its length.
const maxInterned = 4096

func newEventDecoder() *eventDecoder {
	d := &eventDecoder{strings: map[string]string{}}
	for _, s := range []string{
		string(Invoke), string(OK), string(Fail), string(Info),
		FAcquire, FRelease, FExtend, FRead, FWrite,
	} {
		d.strings[s] = s
	}
	return d
}

// decode fills e from line b, which has no surrounding space.
func (d *eventDecoder) decode(b []byte, e *Event) error {
	fast := *e
	if d.event(b, &fast) {
		*e = fast
		return nil
	}
	return json.Unmarshal(b, e)
}

// valueBox holds a Value and the storage its optional fields point into:
// one allocation per value instead of one per field.
type valueBox struct {
	v        Value
	ints     [6]int64
	used     int
	accepted bool
}

func (x *valueBox) int(n int64) *int64 {
	p := &x.ints[x.used]
	*p = n
	x.used++
	return p
}

// cursor scans one line.
type cursor struct {
	b []byte
	i int
}

func (c *cursor) eat(ch byte) bool {
	if c.i < len(c.b) && c.b[c.i] == ch {
		c.i++
		return true
	}
	return false
}

// str reads a string with no escapes, control or non-ASCII bytes (which
// encoding/json would transform or refuse).
func (c *cursor) str() ([]byte, bool) {
	if !c.eat('"') {
		return nil, false
	}
	start := c.i
	for ; c.i < len(c.b); c.i++ {
		switch ch := c.b[c.i]; {
		case ch == '"':
			c.i++
			return c.b[start : c.i-1], true
		case ch == '\\' || ch < 0x20 || ch >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// int reads an integer of at most 18 digits followed by ',' or '}': no
// fraction, exponent, space, leading zero or "-0" (encoding/json refuses
// some of them for an int64, and the rest are left to it).
func (c *cursor) int() (int64, bool) {
	neg := c.eat('-')
	start := c.i
	var n uint64
	for ; c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9'; c.i++ {
		if c.i-start >= 18 {
			return 0, false
		}
		n = n*10 + uint64(c.b[c.i]-'0')
	}
	digits := c.i - start
	switch {
	case digits == 0, digits > 1 && c.b[start] == '0', neg && n == 0:
		return 0, false
	case c.i < len(c.b) && c.b[c.i] != ',' && c.b[c.i] != '}':
		return 0, false
	}
	if neg {
		return -int64(n), true
	}
	return int64(n), true
}

func (d *eventDecoder) intern(b []byte) string {
	// The types and functions of nearly every line, without a map lookup.
	switch string(b) {
	case string(Invoke):
		return string(Invoke)
	case string(OK):
		return string(OK)
	case string(Fail):
		return string(Fail)
	case FAcquire:
		return FAcquire
	case FRelease:
		return FRelease
	case FRead:
		return FRead
	case FWrite:
		return FWrite
	}
	if string(b) == d.last {
		return d.last
	}
	if s, ok := d.strings[string(b)]; ok {
		d.last = s
		return s
	}
	s := string(b)
	if len(d.strings) < maxInterned {
		d.strings[s] = s
	}
	return s
}

// object walks the members of an object, calling member with each key
// once; it fails on a repeated key (left to encoding/json, which keeps the
// last) and on anything member does not accept.
func (c *cursor) object(member func(key []byte, seen *uint32) bool) bool {
	if !c.eat('{') {
		return false
	}
	if c.eat('}') {
		return true
	}
	var seen uint32
	for {
		key, ok := c.str()
		if !ok || !c.eat(':') || !member(key, &seen) {
			return false
		}
		if c.eat('}') {
			return true
		}
		if !c.eat(',') {
			return false
		}
	}
}

// once marks field bit in seen; false when it was already there.
func once(seen *uint32, bit uint32) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// event decodes a whole line on the fast path; false leaves it to
// encoding/json.
func (d *eventDecoder) event(b []byte, e *Event) bool {
	c := &cursor{b: b}
	ok := c.object(func(key []byte, seen *uint32) bool {
		var ok bool
		switch string(key) {
		case "index":
			e.Index, ok = c.int()
			return ok && once(seen, 1<<0)
		case "time":
			e.Time, ok = c.int()
			return ok && once(seen, 1<<1)
		case "process":
			return d.process(c, e) && once(seen, 1<<2)
		case "type":
			s, ok := c.str()
			e.Type = Type(d.intern(s))
			return ok && once(seen, 1<<3)
		case "f":
			s, ok := c.str()
			e.F = d.intern(s)
			return ok && once(seen, 1<<4)
		case "key":
			s, ok := c.str()
			e.Key = d.intern(s)
			return ok && once(seen, 1<<5)
		case "error":
			s, ok := c.str()
			e.Error = string(s)
			return ok && once(seen, 1<<6)
		case "value":
			return d.value(c, e) && once(seen, 1<<7)
		}
		return false
	})
	return ok && c.i == len(b)
}

func (d *eventDecoder) process(c *cursor, e *Event) bool {
	if c.i < len(c.b) && c.b[c.i] == '"' {
		s, ok := c.str()
		e.Process = Nemesis
		return ok && string(s) == "nemesis"
	}
	n, ok := c.int()
	e.Process = Process(n)
	return ok && n >= 0 && n <= math.MaxInt32
}

// value decodes an event's value object; nodes, null and anything unusual
// are left to encoding/json.
func (d *eventDecoder) value(c *cursor, e *Event) bool {
	x := &valueBox{}
	v := &x.v
	str := func(dst *string, intern bool) bool {
		s, ok := c.str()
		if intern {
			*dst = d.intern(s)
		} else {
			*dst = string(s)
		}
		return ok
	}
	num := func(dst *int64) bool {
		n, ok := c.int()
		*dst = n
		return ok
	}
	ptr := func(dst **int64) bool {
		n, ok := c.int()
		*dst = x.int(n)
		return ok
	}
	ok := c.object(func(key []byte, seen *uint32) bool {
		switch string(key) {
		case "token":
			return str(&v.Token, false) && once(seen, 1<<0)
		case "fence":
			return ptr(&v.Fence) && once(seen, 1<<1)
		case "ttl_ms":
			return num(&v.TTLms) && once(seen, 1<<2)
		case "deadline":
			return num(&v.Deadline) && once(seen, 1<<3)
		case "value":
			return ptr(&v.Value) && once(seen, 1<<4)
		case "read":
			return ptr(&v.Read) && once(seen, 1<<5)
		case "prev":
			return ptr(&v.Prev) && once(seen, 1<<6)
		case "accepted":
			switch {
			case c.eatWord("true"):
				x.accepted = true
			case c.eatWord("false"):
			default:
				return false
			}
			v.Accepted = &x.accepted
			return once(seen, 1<<7)
		case "req":
			return str(&v.Req, false) && once(seen, 1<<8)
		case "target":
			return str(&v.Target, true) && once(seen, 1<<9)
		case "pid":
			var n int64
			ok := num(&n) && n >= math.MinInt32 && n <= math.MaxInt32
			v.PID = int(n)
			return ok && once(seen, 1<<10)
		case "duration_ms":
			return num(&v.DurationMs) && once(seen, 1<<11)
		case "failpoint":
			return str(&v.Failpoint, true) && once(seen, 1<<12)
		case "detail":
			return str(&v.Detail, true) && once(seen, 1<<13)
		case "offset_ms":
			return ptr(&v.OffsetMs) && once(seen, 1<<14)
		}
		return false
	})
	e.Value = v
	return ok
}

func (c *cursor) eatWord(w string) bool {
	if len(c.b)-c.i >= len(w) && string(c.b[c.i:c.i+len(w)]) == w {
		c.i += len(w)
		return true
	}
	return false
}

// resource decodes a whole resource log line on the fast path into w,
// whose fields hold their absent marks; false leaves it to encoding/json.
func (d *eventDecoder) resource(b []byte, w *resourceLine) bool {
	c := &cursor{b: b}
	e := &w.ResourceEntry
	num := func(dst *int64) bool {
		n, ok := c.int()
		*dst = n
		return ok
	}
	ok := c.object(func(key []byte, seen *uint32) bool {
		switch string(key) {
		case "seq":
			return num(&e.Seq) && once(seen, 1<<0)
		case "time":
			return num(&e.Time) && once(seen, 1<<1)
		case "key":
			s, ok := c.str()
			e.Key = d.intern(s)
			return ok && once(seen, 1<<2)
		case "process":
			var ev Event
			ok := d.process(c, &ev)
			e.Process = ev.Process
			return ok && once(seen, 1<<3)
		case "req":
			s, ok := c.str()
			e.Req = string(s)
			return ok && once(seen, 1<<4)
		case "fence":
			n, ok := c.int()
			e.Fence = &n
			return ok && once(seen, 1<<5)
		case "read":
			return num(&e.Read) && once(seen, 1<<6)
		case "value":
			return num(&e.Value) && once(seen, 1<<7)
		case "prev":
			return num(&e.Prev) && once(seen, 1<<8)
		case "accepted":
			switch {
			case c.eatWord("true"):
				w.Accepted = presentBool{value: true, set: true}
			case c.eatWord("false"):
				w.Accepted = presentBool{set: true}
			default:
				return false
			}
			return once(seen, 1<<9)
		case "reason":
			s, ok := c.str()
			e.Reason = d.intern(s)
			return ok && once(seen, 1<<10)
		}
		return false
	})
	return ok && c.i == len(b)
}
