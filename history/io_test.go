package history

import (
	"path/filepath"
	"strings"
	"testing"

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
			`{"index":1,"time":2,"process":0,"type":"ok","f":"acquire"}` + "\n", 3, "does not rise"},
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
