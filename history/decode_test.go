package history

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decodeBoth decodes line with the event decoder and with encoding/json
// alone, from the same pre-filled event as Stream uses.
func decodeBoth(d *eventDecoder, line []byte) (fast, slow Event, fastErr, slowErr error) {
	fast = Event{Index: absent, Time: absent, Process: noProcess}
	slow = fast
	fastErr = d.decode(line, &fast)
	slowErr = json.Unmarshal(line, &slow)
	return
}

func TestEventDecoderAgreesWithEncodingJSON(t *testing.T) {
	lines := []string{
		`{"index":0,"time":5,"process":3,"type":"invoke","f":"acquire","key":"k"}`,
		`{"index":1,"time":6,"process":3,"type":"ok","f":"acquire","key":"k","value":{"token":"t","fence":7,"ttl_ms":500,"deadline":99}}`,
		`{"index":2,"time":7,"process":"nemesis","type":"info","f":"pause","value":{"target":"c3","pid":12,"duration_ms":600,"detail":"x","offset_ms":-20}}`,
		`{"index":3,"time":8,"process":1,"type":"ok","f":"write","key":"k","value":{"accepted":false,"prev":0}}`,
		`{"index":3,"time":8,"process":1,"type":"invoke","f":"write","key":"k","value":{"value":2,"read":1,"fence":3,"req":"c1-1"}}`,
		`{"index":3,"time":8,"process":1,"type":"ok","f":"acquire","key":"k","value":{"nodes":["a","b"]}}`,
		`{"index":3,"time":8,"process":1,"type":"fail","f":"read","key":"k","error":"timeout"}`,
		`{"Index":3,"time":8,"process":1,"type":"fail","f":"read"}`,
		`{"index":3,"index":4,"time":8,"process":1,"type":"fail","f":"read"}`,
		`{"index":1.5,"time":8,"process":1,"type":"fail","f":"read"}`,
		`{"index":01,"time":8,"process":1,"type":"fail","f":"read"}`,
		`{"index":-0,"time":-8,"process":1,"type":"fail","f":"read"}`,
		`{"index":99999999999999999999,"time":8,"process":1,"type":"fail","f":"read"}`,
		`{"index":1,"time":8,"process":-1,"type":"fail","f":"read"}`,
		`{"index":1,"time":8,"process":"c1","type":"fail","f":"read"}`,
		`{"index":1,"time":8,"process":1,"type":"fail","f":"read","value":null}`,
		`{"index":1,"time":8,"process":1,"type":"fail","f":"read","value":{"fence":null}}`,
		`{"index":1,"time":8,"process":1,"type":"fail","f":"re\u0061d"}`,
		`{"index":1,"time":8,"process":1,"type":"fail","f":"read"} x`,
		`{"index":1, "time":8,"process":1,"type":"fail","f":"réad"}`,
		`{"index":1,"time":8,"process":1,"type":"fail","f":"read","value":{"accepted":1}}`,
		`{}`,
		`[]`,
	}
	d := newEventDecoder()
	for _, l := range lines[:5] {
		e := Event{}
		assert.True(t, d.event([]byte(l), &e), "what Writer writes takes the fast path: %s", l)
	}
	for _, l := range lines {
		fast, slow, fastErr, slowErr := decodeBoth(d, []byte(l))
		assert.Equal(t, slowErr, fastErr, l)
		assert.Equal(t, slow, fast, l)
	}
	// Random cuts and byte changes of valid lines decode, or are refused,
	// exactly as encoding/json decodes or refuses them.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := mutate(rng, []byte(lines[rng.IntN(5)]))
		fast, slow, fastErr, slowErr := decodeBoth(d, b)
		require.Equal(t, slowErr == nil, fastErr == nil, "%s", b)
		if slowErr == nil {
			require.Equal(t, slow, fast, "%s", b)
		}
	}
}

func TestResourceDecoderAgreesWithEncodingJSON(t *testing.T) {
	lines := []string{
		`{"seq":1,"time":1000001200000,"key":"lock-0","process":2,"req":"c2-1","fence":1,"read":0,"value":1,"prev":0,"accepted":true}`,
		`{"seq":2,"time":7,"key":"k","process":0,"req":"c0-2","read":1,"value":2,"prev":2,"accepted":false,"reason":"stale fence"}`,
		`{"seq":3,"time":7,"key":"k","process":0,"read":-1,"value":0,"prev":-1,"accepted":true}`,
	}
	blank := resourceLine{ResourceEntry: ResourceEntry{Seq: absent, Time: absent, Process: noProcess, Read: absent, Value: absent, Prev: absent}}
	d := newEventDecoder()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 20000 {
		b := []byte(lines[i%len(lines)])
		if i >= len(lines) {
			b = mutate(rng, b)
		}
		fast, slow := blank, blank
		if i < len(lines) {
			require.True(t, d.resource(b, &fast), "what the resource writes takes the fast path: %s", b)
		} else if !d.resource(b, &fast) {
			continue
		}
		require.NoError(t, json.Unmarshal(b, &slow), "the fast path took a line encoding/json refuses: %s", b)
		require.Equal(t, slow, fast, "%s", b)
	}
}

// mutate cuts a line short or changes a byte or two of it, to random
// bytes JSON gives meaning to.
func mutate(rng *rand.Rand, b []byte) []byte {
	alphabet := []byte(`{}[]":,-0123456789.etrufalsn \` + "\x00\xff")
	if rng.IntN(3) == 0 {
		return b[:rng.IntN(len(b))]
	}
	for range 1 + rng.IntN(2) {
		b[rng.IntN(len(b))] = alphabet[rng.IntN(len(alphabet))]
	}
	return b
}
