package checker

import (
	"bufio"
	"cmp"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/history"
)

// BenchmarkPorcupineAlone is the yardstick of `lockcheck check` on a real
// run's history (LOCKCHECK_BENCH_HISTORY, a history.jsonl): what a program
// of porcupine alone takes to read the same history (each line decoded by
// encoding/json, as such a program would) and check its read-modify-writes,
// each key's operations whole, with the checker's model. Every write is
// judged by its own outcome (ok accepted, fail refused, info unknown): no
// lease, fence, ownership or liveness check, no resource log, no report.
// The lockcheck-reader variant reads it with lockcheck's own decoder.
func BenchmarkPorcupineAlone(b *testing.B) {
	path := os.Getenv("LOCKCHECK_BENCH_HISTORY")
	if path == "" {
		b.Skip("set LOCKCHECK_BENCH_HISTORY to a history.jsonl")
	}
	check := func(h *history.History) {
		for _, ops := range porcupineOperations(h) {
			porcupine.CheckOperationsTimeout(rmwModel(oneValue(0)), ops, DefaultLinearizabilityTimeout)
		}
	}
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			check(decodeWithEncodingJSON(b, path))
		}
	})
	b.Run("lockcheck-reader", func(b *testing.B) {
		for b.Loop() {
			h, err := history.ReadFile(path)
			require.NoError(b, err)
			check(h)
		}
	})
}

// decodeWithEncodingJSON reads a history's events line by line with
// encoding/json, skipping the header.
func decodeWithEncodingJSON(tb testing.TB, path string) *history.History {
	f, err := os.Open(path)
	require.NoError(tb, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	h := &history.History{}
	for first := true; sc.Scan(); first = false {
		if first {
			continue
		}
		var e history.Event
		require.NoError(tb, json.Unmarshal(sc.Bytes(), &e))
		h.Events = append(h.Events, e)
	}
	require.NoError(tb, sc.Err())
	return h
}

// porcupineOperations pairs each key's reads and writes into the model's
// operations: a write with the read before it (one operation from the
// read's invoke to the write's completion), a read no write followed on
// its own.
func porcupineOperations(h *history.History) map[string][]porcupine.Operation {
	type pending struct {
		call       int64
		read       *int64
		readReturn int64
		write      *int64
	}
	ops := map[string][]porcupine.Operation{}
	open := map[history.Process]*pending{}
	lanes := map[history.Process]int{}
	emitRead := func(key string, p history.Process, o *pending) {
		if o != nil && o.read != nil && o.write == nil {
			ops[key] = append(ops[key], porcupine.Operation{ClientId: lanes[p], Call: o.call, Return: o.readReturn,
				Input: rmwInput{kind: opRead, process: p}, Output: rmwOutput{read: *o.read, known: true}})
		}
	}
	for i := range h.Events {
		e := &h.Events[i]
		p := e.Process
		if p == history.Nemesis || (e.F != history.FRead && e.F != history.FWrite) {
			continue
		}
		if _, ok := lanes[p]; !ok {
			lanes[p] = len(lanes)
		}
		switch {
		case e.F == history.FRead && e.Type == history.Invoke:
			emitRead(e.Key, p, open[p])
			open[p] = &pending{call: e.Time}
		case e.F == history.FRead && e.Type == history.OK && open[p] != nil && e.Value != nil:
			open[p].read, open[p].readReturn = e.Value.Value, e.Time
		case e.F == history.FWrite && e.Type == history.Invoke:
			if open[p] == nil {
				open[p] = &pending{call: e.Time}
			}
			if e.Value != nil {
				open[p].write = e.Value.Value
			}
		case e.F == history.FWrite:
			o := open[p]
			delete(open, p)
			if o == nil {
				continue
			}
			in := rmwInput{process: p, kind: opWriteUnknown}
			switch e.Type {
			case history.OK:
				in.kind = opWriteAccepted
			case history.Fail:
				in.kind = opWriteRefused
			}
			if o.write != nil {
				in.value = *o.write
			} else if in.kind != opWriteRefused {
				in.kind = opWriteNoValue
			}
			out := rmwOutput{}
			if o.read != nil {
				out = rmwOutput{read: *o.read, known: true}
			}
			ops[e.Key] = append(ops[e.Key], porcupine.Operation{ClientId: lanes[p], Call: o.call, Return: e.Time, Input: in, Output: out})
		}
	}
	for key := range ops {
		slices.SortFunc(ops[key], func(a, b porcupine.Operation) int {
			return cmp.Or(cmp.Compare(a.Call, b.Call), cmp.Compare(a.Return, b.Return))
		})
	}
	return ops
}
