package history

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const header = `{"lockcheck_history":1,"start_time":5,"config":{"backend":"redis","workload":"fenced","nemesis":null,"seed":1,"clients":2,"keys":1,"ttl_ms":100,"time_limit_ms":1000}}`

func TestReadMalformed(t *testing.T) {
	tests := []struct {
		name  string
		input string
		line  int
		want  string
	}{
		{"empty input", "", 1, "no header"},
		{"empty first line", "\n" + header + "\n", 1, "header was expected"},
		{"no header", `{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire"}` + "\n", 1, `"lockcheck_history"`},
		{"header not JSON", "lockcheck\n", 1, "not a JSON object"},
		{"unsupported version", `{"lockcheck_history":99}` + "\n", 1, "version 99 is not supported"},
		{"event not JSON", header + "\n{oops}\n{}\n", 2, "invalid character"},
		{"index does not rise", header + "\n" +
			`{"index":1,"time":1,"process":0,"type":"invoke","f":"acquire"}` + "\n" +
			`{"index":0,"time":2,"process":0,"type":"ok","f":"acquire"}` + "\n", 3, "does not rise"},
		{"completion without invoke", header + "\n" +
			`{"index":0,"time":1,"process":0,"type":"ok","f":"acquire"}` + "\n", 2, "no pending invoke"},
		{"completion of another function", header + "\n" +
			`{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire"}` + "\n" +
			`{"index":1,"time":2,"process":0,"type":"ok","f":"release"}` + "\n", 3, "completes release but invoked acquire"},
		{"two invokes", header + "\n" +
			`{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire"}` + "\n" +
			`{"index":1,"time":2,"process":0,"type":"invoke","f":"read"}` + "\n", 3, "still pending"},
		{"unknown type", header + "\n" + `{"index":0,"time":1,"process":0,"type":"maybe","f":"read"}` + "\n", 2, "unknown type"},
		{"missing f", header + "\n" + `{"index":0,"time":1,"process":0,"type":"invoke"}` + "\n", 2, `missing "f"`},
		{"nemesis invoke", header + "\n" + `{"index":0,"time":1,"process":"nemesis","type":"invoke","f":"pause"}` + "\n", 2, "not invokes"},
		{"misspelled f", header + "\n" + `{"index":0,"time":1,"process":0,"type":"invoke","f":"aquire"}` + "\n", 2, `unknown f "aquire"`},
		{"missing time", header + "\n" + `{"index":0,"process":0,"type":"invoke","f":"acquire"}` + "\n", 2, `missing "time"`},
		{"null time", header + "\n" + `{"index":0,"time":null,"process":0,"type":"invoke","f":"acquire"}` + "\n", 2, `missing "time"`},
		{"missing process", header + "\n" + `{"index":0,"time":1,"type":"invoke","f":"acquire"}` + "\n", 2, `missing "process"`},
		{"missing type", header + "\n" + `{"index":0,"time":1,"process":0,"f":"acquire"}` + "\n", 2, `missing "type"`},
		{"missing index", header + "\n" + `{"time":1,"process":0,"type":"invoke","f":"acquire"}` + "\n", 2, `missing "index"`},
		{"duplicate index", header + "\n" +
			`{"index":4,"time":1,"process":0,"type":"invoke","f":"acquire"}` + "\n" +
			`{"index":4,"time":2,"process":1,"type":"invoke","f":"acquire"}` + "\n", 3, "duplicate index 4"},
		{"completion before invoke", header + "\n" +
			`{"index":0,"time":10,"process":0,"type":"invoke","f":"acquire"}` + "\n" +
			`{"index":1,"time":9,"process":0,"type":"ok","f":"acquire"}` + "\n", 3, "before its invoke"},
		{"two completions", header + "\n" +
			`{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire"}` + "\n" +
			`{"index":1,"time":2,"process":0,"type":"fail","f":"acquire"}` + "\n" +
			`{"index":2,"time":3,"process":0,"type":"ok","f":"acquire"}` + "\n", 4, "no pending invoke"},
		{"retired process acts again", header + "\n" +
			`{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire"}` + "\n" +
			`{"index":1,"time":2,"process":0,"type":"info","f":"acquire"}` + "\n" +
			`{"index":2,"time":3,"process":0,"type":"invoke","f":"release"}` + "\n", 4, "retired"},
		{"nemesis ok", header + "\n" + `{"index":0,"time":1,"process":"nemesis","type":"ok","f":"pause"}` + "\n", 2, "must be info"},
		{"negative process", header + "\n" + `{"index":0,"time":1,"process":-3,"type":"invoke","f":"read"}` + "\n", 2, "non-negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tt.input))
			var pe *ParseError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tt.line, pe.Line)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestReadAcceptsUnknownNemesisVerb(t *testing.T) {
	h, err := Read(strings.NewReader(header + "\n" + `{"index":0,"time":1,"process":"nemesis","type":"info","f":"brownout"}` + "\n"))
	require.NoError(t, err)
	assert.Len(t, h.Events, 1)
}

func TestReadFileNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(header+"\n"+`{"index":0,"time":1,"process":0,"type":"invoke","f":"aquire"}`+"\n"), 0o644))
	_, err := ReadFile(path)
	require.Error(t, err)
	assert.Equal(t, path+` line 2: unknown f "aquire" for a client operation (want acquire, release, extend, read or write)`, err.Error())
}

func TestReadResource(t *testing.T) {
	const good = `{"seq":1,"time":5,"key":"lock-0","process":0,"req":"0-1","read":0,"value":1,"prev":0,"accepted":true}`
	tests := []struct {
		name      string
		input     string
		entries   int
		truncated bool
		line      int // of the error; 0 when none
		want      string
	}{
		{"good", good + "\n", 1, false, 0, ""},
		{"empty", "", 0, false, 0, ""},
		{"cut-off last line", good + "\n" + `{"seq":2,"time":6,"ke`, 1, true, 0, ""},
		{"last line complete without newline", good, 1, false, 0, ""},
		{"bad line in the middle", good + "\n{oops}\n" + good + "\n", 0, false, 2, "invalid character"},
		{"missing accepted", `{"seq":1,"time":5,"key":"k","process":0,"read":0,"value":1,"prev":0}` + "\n", 0, false, 1, `missing "accepted"`},
		{"missing time", `{"seq":1,"key":"k","process":0,"read":0,"value":1,"prev":0,"accepted":true}` + "\n", 0, false, 1, `missing "time"`},
		{"missing prev", `{"seq":1,"time":5,"key":"k","process":0,"read":0,"value":1,"accepted":true}` + "\n", 0, false, 1, `missing "prev"`},
		{"duplicate seq", good + "\n" + good + "\n", 0, false, 2, "duplicate seq 1"},
		{"a line longer than the read buffer", good + "\n" + `{"seq":2,"time":6,"key":"k","process":0,"read":0,"value":1,"prev":0,"accepted":false,"reason":"` + strings.Repeat("x", 100000) + `"}` + "\n" + strings.Replace(good, `"seq":1`, `"seq":3`, 1) + "\n", 3, false, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "resource.jsonl")
			require.NoError(t, os.WriteFile(path, []byte(tt.input), 0o644))
			l, err := ReadResource(path)
			if tt.line == 0 {
				require.NoError(t, err)
				assert.Len(t, l.Entries, tt.entries)
				assert.NotNil(t, l.Entries)
				assert.Equal(t, tt.truncated, l.Truncated)
				return
			}
			var pe *ParseError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tt.line, pe.Line)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), path+" line ")
		})
	}
}

func TestReadTruncatedLastLine(t *testing.T) {
	input := header + "\n" +
		`{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire"}` + "\n" +
		`{"index":1,"time":2,"process":0,"ty`
	h, err := Read(strings.NewReader(input))
	require.NoError(t, err)
	assert.True(t, h.Truncated)
	assert.Len(t, h.Events, 1)
}

func TestWriteThenRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	w, err := Create(path, Header{StartTime: 5, Config: RunConfig{Backend: "redis", Workload: "fenced"}})
	require.NoError(t, err)
	_, err = w.Append(Event{Time: 1, Process: 0, Type: Invoke, F: FAcquire, Key: "lock-0"})
	require.NoError(t, err)
	_, err = w.Append(Event{Time: 2, Process: 0, Type: OK, F: FAcquire, Key: "lock-0", Value: &Value{Fence: Int64(3), TTLms: 100}})
	require.NoError(t, err)
	_, err = w.Append(Event{Time: 3, Process: Nemesis, Type: Info, F: NemPause, Value: &Value{Target: "c0"}})
	require.NoError(t, err)
	require.NoError(t, w.Close())

	h, err := ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, SchemaVersion, h.Header.Version)
	assert.True(t, h.Header.Config.Fenced())
	require.Len(t, h.Events, 3)
	assert.Equal(t, []int64{0, 1, 2}, []int64{h.Events[0].Index, h.Events[1].Index, h.Events[2].Index})
	assert.Equal(t, int64(3), *h.Events[1].Value.Fence)
	assert.Equal(t, Nemesis, h.Events[2].Process)
	assert.False(t, h.Truncated)
}

// TestStreamAtTellsWhereEachLineBegins: the offset StreamAt tells is where
// the event's line begins, blank lines and a long line included, so that
// SkimEvents from it reads that event first.
func TestStreamAtTellsWhereEachLineBegins(t *testing.T) {
	// The longest line a history may hold: with its newline, longer than
	// the reader's buffer.
	failed := `{"index":1,"time":2,"process":0,"type":"fail","f":"acquire","key":"k","error":"`
	long := strings.Repeat("x", MaxLine-len(failed)-len(`"}`))
	text := header + "\n" +
		`{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire","key":"k"}` + "\n\n" +
		failed + long + `"}` + "\n" +
		`{"index":2,"time":3,"process":1,"type":"invoke","f":"acquire","key":"k"}` + "\n"
	var offsets []int64
	_, err := StreamAt(strings.NewReader(text), func(Header) error { return nil }, func(e *Event, offset int64) error {
		offsets = append(offsets, offset)
		return nil
	})
	require.NoError(t, err)
	require.Len(t, offsets, 3)
	for i, at := range offsets {
		var first *Event
		_, err := SkimEvents(strings.NewReader(text[at:]), func(_ Head, decode func() (*Event, error)) error {
			if first == nil {
				e, err := decode()
				require.NoError(t, err)
				first = new(*e)
			}
			return nil
		})
		require.NoError(t, err)
		require.NotNil(t, first)
		assert.Equal(t, int64(i), first.Index, "offset %d begins event %d", at, i)
	}
}

// TestLinesOverTheLimit: every reader of a history or resource log takes a
// line of MaxLine bytes and refuses a longer one as a ParseError of its
// line, ended by a newline or not (a cut last line over the limit is no
// run killed mid-write).
func TestLinesOverTheLimit(t *testing.T) {
	event := `{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire","key":"k"}`
	entry := `{"seq":1,"time":5,"key":"k","process":0,"req":"0-1","read":0,"value":1,"prev":0,"accepted":true}`
	// padded is line padded with spaces to n bytes: the same JSON.
	padded := func(line string, n int) string { return line + strings.Repeat(" ", n-len(line)) }
	readers := []struct {
		name     string
		resource bool
		read     func(path string) error
	}{
		{"ReadFile", false, func(path string) error { _, err := ReadFile(path); return err }},
		{"Skim", false, func(path string) error {
			f, err := os.Open(path)
			require.NoError(t, err)
			defer f.Close()
			_, err = Skim(f, func(Header) error { return nil }, func(Head, func() (*Event, error)) error { return nil })
			return err
		}},
		{"Tail", false, func(path string) error {
			tail, err := OpenTail(path, false)
			require.NoError(t, err)
			defer tail.Close()
			lines := NewEventLines(func(Header) error { return nil }, func(*Event) error { return nil })
			return tail.Lines(lines.Line)
		}},
		{"ReadResource", true, func(path string) error { _, err := ReadResource(path); return err }},
		{"Tail of a resource log", true, func(path string) error {
			tail, err := OpenTail(path, true)
			require.NoError(t, err)
			defer tail.Close()
			return tail.Lines(NewResourceLines(func(*ResourceEntry) error { return nil }).Line)
		}},
	}
	tests := []struct {
		name string
		size int    // of the long line
		end  string // after it
		line int    // of the error; 0 when none
	}{
		{"at the limit", MaxLine, "\n", 0},
		{"over the limit", MaxLine + 1, "\n", 2},
		{"far over the limit, no newline", 8 * MaxLine, "", 2},
	}
	for _, r := range readers {
		for _, tt := range tests {
			t.Run(r.name+"/"+tt.name, func(t *testing.T) {
				text := header + "\n" + padded(event, tt.size) + tt.end
				if r.resource {
					text = entry + "\n" + padded(strings.Replace(entry, `"seq":1`, `"seq":2`, 1), tt.size) + tt.end
				}
				path := filepath.Join(t.TempDir(), "input.jsonl")
				require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
				err := r.read(path)
				if tt.line == 0 {
					require.NoError(t, err)
					return
				}
				var pe *ParseError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, tt.line, pe.Line)
				assert.Contains(t, err.Error(), "line 2: over 1048576 bytes (1 MiB)")
				assert.Contains(t, err.Error(), "cut the file before this line")
			})
		}
	}
}

// TestWriterKeepsLinesWithinTheLimit: a history lockcheck writes is one it
// reads. An event whose free text (a lock client program's error or
// detail) would take it over MaxLine, escaped as JSON, is written with that
// text shortened; one still too long (a giant token) ends the recording
// with an error rather than a line every reader refuses.
func TestWriterKeepsLinesWithinTheLimit(t *testing.T) {
	huge := func(s string) string { return strings.Repeat(s, 2*MaxLine/len(s)) }
	tests := []struct {
		name   string
		event  Event
		prefix string // of the error or detail read back; "" for an event refused
	}{
		{"a short error is kept whole", Event{Error: "timeout"}, "timeout"},
		{"an error that grows when escaped", Event{Error: huge("<")}, "<<<"},
		{"a detail of multi-byte characters", Event{Value: &Value{Detail: huge("é")}}, "ééé"},
		{"a token is never cut", Event{Value: &Value{Token: huge("t")}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "history.jsonl")
			w, err := Create(path, Header{})
			require.NoError(t, err)
			e := tt.event
			e.Time, e.Process, e.Type, e.F = 1, 0, Invoke, FAcquire
			_, err = w.Append(e)
			if tt.prefix == "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "event 0 (invoke acquire of process c0) is over 1048576 bytes (1 MiB)")
				_, again := w.Append(e)
				assert.Equal(t, err, again, "the recording ends")
				require.NoError(t, w.Close())
				h, err := ReadFile(path)
				require.NoError(t, err, "what was written is read")
				assert.Empty(t, h.Events)
				return
			}
			require.NoError(t, err)
			require.NoError(t, w.Close())
			h, err := ReadFile(path)
			require.NoError(t, err)
			require.Len(t, h.Events, 1)
			text := h.Events[0].Error
			if v := h.Events[0].Value; v != nil {
				text = v.Detail
			}
			assert.True(t, strings.HasPrefix(text, tt.prefix), "%.40q", text)
			if len(text) > maxText {
				assert.Regexp(t, `\.\.\. \(\d+ bytes cut\)$`, text)
				assert.True(t, utf8.ValidString(text))
			}
		})
	}
}
