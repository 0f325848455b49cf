package results

import (
	"fmt"
	"math"
	"slices"

	"github.com/lockcheck/lockcheck/checker"
)

// SweepCells groups runs into their cells, in the grid's order, and adds
// each cell up.
func SweepCells(runs []SweepRun) []SweepCell {
	var cells []SweepCell
	index := map[string]int{}
	sorted := slices.Clone(runs)
	slices.SortStableFunc(sorted, func(a, b SweepRun) int { return a.At - b.At })
	for _, r := range sorted {
		k := r.CellKey()
		i, ok := index[k]
		if !ok {
			i = len(cells)
			index[k] = i
			cells = append(cells, SweepCell{Backend: r.Backend, Variant: r.Variant, Workload: r.Workload, Nemesis: r.Nemesis,
				Settings: r.Settings, FailedChecks: map[string]int{}})
		}
		c := &cells[i]
		c.Runs = append(c.Runs, r.At)
		c.Seeds++
		switch {
		case r.Status == CellSkipped:
			c.Why = r.Why
		case r.Status != CellRan || r.Valid == nil:
			c.Unknown++
		case *r.Valid == checker.Invalid:
			c.False++
		case *r.Valid == checker.Valid:
			c.Held++
		case r.Measures != nil && r.Measures.WithinLease:
			c.Held++
			c.WithinLease++
		default:
			c.Unknown++
		}
	}
	byAt := map[int]*SweepRun{}
	for i := range sorted {
		byAt[sorted[i].At] = &sorted[i]
	}
	for i := range cells {
		addUp(&cells[i], byAt)
	}
	return cells
}

// addUp computes a cell's outcome and measures from its runs.
func addUp(c *SweepCell, byAt map[int]*SweepRun) {
	var recoveries, p50s, p99s, grants, perMin []float64
	for _, at := range c.Runs {
		r := byAt[at]
		m := r.Measures
		if m == nil {
			continue
		}
		for _, k := range m.Failed {
			c.FailedChecks[k]++
		}
		recoveries = append(recoveries, m.RecoveriesMs...)
		c.RecoveryNeverCame += m.RecoveryNeverCame
		p50s, p99s = append(p50s, m.AcquireP50Ms), append(p99s, m.AcquireP99Ms)
		grants, perMin = append(grants, m.GrantsPerSec), append(perMin, m.WindowsPerMinute)
		c.LongestWindowMs = max(c.LongestWindowMs, m.LongestWindowMs)
		c.StaleRefused += m.StaleRefused
	}
	ran := c.False + c.Held + c.Unknown
	switch {
	case ran == 0 && c.Why != "":
		c.Outcome = OutcomeSkipped
		c.Excludes = "skipped: " + c.Why
		return
	case c.False > 0:
		c.Outcome = OutcomeUnsafe
	case c.Unknown > 0 || ran == 0:
		c.Outcome = OutcomeUnknown
	default:
		c.Outcome = OutcomeSafe
	}
	if ran > 0 {
		c.ShareFalse = float64(c.False) / float64(ran)
	}
	c.Excludes = Excludes(c.False, c.Held, c.Unknown)
	if c.WithinLease > 0 {
		c.Excludes += fmt.Sprintf(" (%d of the seeds held with every fault delivered in full but within the lease: the fault's own moment, a lease running out under it, never came)", c.WithinLease)
	}
	if len(recoveries) > 0 {
		p50, mx := quantileOf(recoveries, 0.5), slices.Max(recoveries)
		c.RecoveryP50Ms, c.RecoveryMaxMs = &p50, &mx
	}
	c.AcquireP50Ms, c.AcquireP99Ms = quantileOf(p50s, 0.5), maxOf(p99s)
	c.GrantsPerSec, c.WindowsPerMinute = mean(grants), mean(perMin)
}

// Excludes says what a cell's seeds show at 95 % confidence: with none
// false of n, the failure rates above 1-0.05^(1/n) are excluded (26 % for
// n = 10); with k false, the cell is unsafe and the rates below the
// Clopper-Pearson lower bound are excluded. Seeds with no verdict leave
// the cell neither safe nor unsafe.
func Excludes(falseRuns, held, unknown int) string {
	n := falseRuns + held
	switch {
	case falseRuns > 0:
		lo := binomialLowerBound(falseRuns, n+unknown)
		s := fmt.Sprintf("%d of %d false: unsafe; a failure rate below %s is excluded at 95 %% confidence", falseRuns, n+unknown, percent(lo))
		if unknown > 0 {
			s += fmt.Sprintf(" (%d without a verdict counted as not false)", unknown)
		}
		return s
	case unknown > 0 && n == 0:
		return fmt.Sprintf("no verdict in %d seeds: neither safe nor unsafe", unknown)
	case unknown > 0:
		return fmt.Sprintf("0 of %d false, but %d without a verdict: neither safe nor unsafe", n, unknown)
	case n == 0:
		return "no seed ran"
	}
	return fmt.Sprintf("0 of %d false: a failure rate above %s is excluded at 95 %% confidence", n, percent(1-math.Pow(1-Confidence, 1/float64(n))))
}

// binomialLowerBound is the one-sided 95 % lower bound on a failure rate
// with k failures in n runs: the rate p at which k or more failures have
// probability 0.05.
func binomialLowerBound(k, n int) float64 {
	if k == 0 {
		return 0
	}
	lo, hi := 0.0, 1.0
	for range 60 {
		p := (lo + hi) / 2
		if tailAtLeast(k, n, p) < 1-Confidence {
			lo = p
		} else {
			hi = p
		}
	}
	return lo
}

// tailAtLeast is P(X >= k) for X binomial(n, p).
func tailAtLeast(k, n int, p float64) float64 {
	sum := 0.0
	for i := k; i <= n; i++ {
		lg, _ := math.Lgamma(float64(n + 1))
		li, _ := math.Lgamma(float64(i + 1))
		lni, _ := math.Lgamma(float64(n - i + 1))
		sum += math.Exp(lg - li - lni + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return sum
}

func percent(p float64) string {
	v := p * 100
	if v >= 10 {
		return fmt.Sprintf("%.0f %%", math.Floor(v+0.5))
	}
	return fmt.Sprintf("%.1f %%", v)
}

// quantileOf is the q-quantile of unsorted values (nearest rank), 0 for
// none.
func quantileOf(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return quantile(s, q)
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}
