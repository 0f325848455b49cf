package checker

import (
	"bytes"
	"flag"
	"reflect"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"

	"github.com/lockcheck/lockcheck/checker/checktest"
	"github.com/lockcheck/lockcheck/history"
)

// differentialChecks is how many random histories each differential test
// draws unless -rapid.checks says otherwise.
const differentialChecks = "10000"

// manyChecks raises rapid's number of checks to differentialChecks, unless
// the command line set it.
func manyChecks(t *testing.T) {
	f := flag.Lookup("rapid.checks")
	if f != nil && f.Value.String() == f.DefValue {
		if err := f.Value.Set(differentialChecks); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Value.Set(f.DefValue) })
	}
}

// TestDifferentialLease holds the fast lease-safety and double-ownership
// checks against the brute-force oracle (every count) and porcupine's
// lease-mutex model (the verdict) on random histories.
func TestDifferentialLease(t *testing.T) {
	manyChecks(t)
	opts := Options{}.withDefaults()
	var invalid, compared int
	defer func() { t.Logf("%d of the histories broke lease safety; porcupine decided %d", invalid, compared) }()
	rapid.Check(t, func(rt *rapid.T) {
		b := checktest.Random(rt, false)
		h := b.Build(rt)
		r := Check(h, nil, opts)
		if !r.Checks.LeaseSafety.Valid {
			invalid++
		}

		grants := oracleGrants(h, opts.ClockAllowance)
		if want := oracleLeaseViolations(grants); r.Checks.LeaseSafety.Violations != want {
			rt.Fatalf("lease safety: fast checker counts %d violations, the oracle %d\n%s", r.Checks.LeaseSafety.Violations, want, b.JSONL(rt))
		}
		windows, total := oracleWindows(grants)
		if r.Checks.DoubleOwnership.Windows != windows || !near(r.Checks.DoubleOwnership.TotalMs, float64(total)/1e6) {
			rt.Fatalf("double ownership: fast checker %d windows of %.6f ms, the oracle %d of %.6f ms\n%s",
				r.Checks.DoubleOwnership.Windows, r.Checks.DoubleOwnership.TotalMs, windows, float64(total)/1e6, b.JSONL(rt))
		}
		ops, comparable := leaseOperations(h, opts.ClockAllowance)
		if !comparable {
			return
		}
		res := porcupine.CheckOperationsTimeout(leaseMutexModel, ops, 5*time.Second)
		if res == porcupine.Unknown {
			return
		}
		compared++
		if (res == porcupine.Ok) != r.Checks.LeaseSafety.Valid {
			rt.Fatalf("lease safety valid %v, porcupine's lease-mutex model says %s\n%s", r.Checks.LeaseSafety.Valid, res, b.JSONL(rt))
		}
	})
}

// TestDifferentialLinearizability holds the segmented linearizability check,
// cut at every quiescent point, against porcupine on each key's whole
// history, wherever porcupine finishes.
func TestDifferentialLinearizability(t *testing.T) {
	manyChecks(t)
	defer func(n int) { minSegmentOps = n }(minSegmentOps)
	minSegmentOps = 1
	var illegal, cut int
	defer func() {
		t.Logf("%d of the histories were not linearizable; %d were cut into several segments", illegal, cut)
	}()
	rapid.Check(t, func(rt *rapid.T) {
		b := checktest.Random(rt, true)
		h := b.Build(rt)
		r := Check(h, nil, Options{})
		if r.Checks.Linearizability.Result == LinearizabilityUnknown {
			return
		}
		if r.Checks.Linearizability.Result == NotLinearizable {
			illegal++
		}
		if r.Checks.Linearizability.Segments > 1 {
			cut++
		}
		f := scan(h, DefaultClockAllowance)
		whole := porcupine.Ok
		for _, k := range f.keys {
			ops := keyOperations(k, newOutcomes(nil))
			if len(ops) == 0 {
				continue
			}
			res := porcupine.CheckOperationsTimeout(rmwModel(regState{}), ops, 5*time.Second)
			if res == porcupine.Unknown {
				return
			}
			if res == porcupine.Illegal {
				whole = porcupine.Illegal
			}
		}
		if want := map[porcupine.CheckResult]string{porcupine.Ok: Linearizable, porcupine.Illegal: NotLinearizable}[whole]; r.Checks.Linearizability.Result != want {
			rt.Fatalf("segmented linearizability %s (%d segments), porcupine on the whole history %s\n%s",
				r.Checks.Linearizability.Result, r.Checks.Linearizability.Segments, want, b.JSONL(rt))
		}
	})
}

func near(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }

// TestDifferentialStream holds the streaming check (CheckStream, which
// scans events as they are decoded and keeps none) to the check of the
// parsed history, on random histories with and without reads and writes:
// the same verdict, counts, evidence and reasons.
func TestDifferentialStream(t *testing.T) {
	manyChecks(t)
	rapid.Check(t, func(rt *rapid.T) {
		b := checktest.Random(rt, rapid.Bool().Draw(rt, "reads and writes"))
		text := b.JSONL(rt)
		h, err := history.Read(bytes.NewReader(text))
		if err != nil {
			rt.Fatalf("the builder wrote a history the reader refuses: %v\n%s", err, text)
		}
		streamed, err := CheckStream(bytes.NewReader(text), nil, Options{})
		if err != nil {
			rt.Fatalf("CheckStream refused a history Read accepts: %v", err)
		}
		if want := Check(h, nil, Options{}); !reflect.DeepEqual(want, streamed) {
			rt.Fatalf("streamed check differs:\nwant %+v\ngot  %+v\n%s", want, streamed, text)
		}
	})
}

// TestDifferentialOrphans holds the orphaned-lock rule of the liveness
// check (a sweep of each key's claims and refusals, a stretch at a time)
// against the oracle, which applies docs/history.md's definition to every
// pair of refusals, on random histories whose lock service orphans the key
// or stays honest: the same orphaned stretches, from the same moment to
// the same moment, with the same refusals.
func TestDifferentialOrphans(t *testing.T) {
	manyChecks(t)
	var histories, orphaned, agreed int
	defer func() {
		t.Logf("%d histories, %d of them orphaned; the rule and the oracle agreed on %d", histories, orphaned, agreed)
	}()
	rapid.Check(t, func(rt *rapid.T) {
		b := checktest.RandomOrphan(rt)
		h := b.Build(rt)
		histories++
		l := Check(h, nil, Options{}).Checks.Liveness
		want := oracleOrphans(h)
		var got []oracleOrphan
		for _, o := range l.Orphans {
			got = append(got, oracleOrphan{from: o.From, to: o.To, refused: o.Refused})
		}
		if l.Orphaned != len(want) || !reflect.DeepEqual(got, want) {
			rt.Fatalf("orphaned stretches: the liveness check found %d %+v, the oracle %d %+v\n%s", l.Orphaned, got, len(want), want, b.JSONL(rt))
		}
		if len(want) > 0 {
			orphaned++
		}
		agreed++
	})
	assert.Positive(t, orphaned, "some histories are orphaned")
	assert.Less(t, orphaned, histories, "and some are not")
}
