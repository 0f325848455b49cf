package workloads

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Distribution is a duration drawn afresh for each critical section (the
// think time) or each fault (a pause): uniformly from a range [Min, Max],
// or from measured durations (a GC log's pause times) through their
// quantiles. The zero value is always 0.
type Distribution struct {
	Min, Max time.Duration
	// Quantiles, when set, are the 0th to 100th percentiles of measured
	// durations (QuantileCount of them, rising); Min and Max are then the
	// first and the last.
	Quantiles []time.Duration
}

// QuantileCount is how many quantiles a distribution read from measured
// durations keeps: every percentile, from the least to the greatest.
const QuantileCount = 101

// quantilesPrefix starts the written form of a measured distribution, the
// form a worker is handed and a history header records: its percentiles
// joined by "/" (no comma, so that it survives a comma-separated list).
const quantilesPrefix = "quantiles:"

// distributionForms says what ParseDistribution reads, for its errors.
const distributionForms = "a duration (20ms), a range (10ms-50ms) or @FILE (measured durations in ms, one per line)"

// ParseDistribution reads "20ms", "10ms-50ms", "@FILE" (a file of measured
// durations in milliseconds, one per line; blank lines and lines starting
// with # are skipped) or the written form of a measured distribution
// (String).
func ParseDistribution(s string) (Distribution, error) {
	s = strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(s, "@"):
		return ReadDurations(strings.TrimPrefix(s, "@"))
	case strings.HasPrefix(s, quantilesPrefix):
		return parseQuantiles(s)
	}
	lo, hi, found := strings.Cut(s, "-")
	min, err := time.ParseDuration(strings.TrimSpace(lo))
	if err != nil {
		return Distribution{}, fmt.Errorf("%q is not %s", s, distributionForms)
	}
	max := min
	if found {
		if max, err = time.ParseDuration(strings.TrimSpace(hi)); err != nil || max < min {
			return Distribution{}, fmt.Errorf("%q is not %s", s, distributionForms)
		}
	}
	if min < 0 {
		return Distribution{}, fmt.Errorf("%q: a duration cannot be negative", s)
	}
	return Distribution{Min: min, Max: max}, nil
}

// ReadDurations reads a file of measured durations in milliseconds, one per
// line (a decimal number, such as 12 or 3.5), into their distribution.
func ReadDurations(path string) (Distribution, error) {
	f, err := os.Open(path)
	if err != nil {
		return Distribution{}, fmt.Errorf("read durations: %w (want a file of durations in ms, one per line)", err)
	}
	defer f.Close()
	var ds []time.Duration
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		ms, err := strconv.ParseFloat(strings.TrimSuffix(text, "ms"), 64)
		if err != nil || ms < 0 || ms > 1e9 {
			return Distribution{}, fmt.Errorf("%s:%d: %q is not a duration in ms (want a number such as 12 or 3.5 on each line)", path, line, text)
		}
		ds = append(ds, time.Duration(ms*float64(time.Millisecond)))
	}
	if err := sc.Err(); err != nil {
		return Distribution{}, fmt.Errorf("read %s: %w", path, err)
	}
	if len(ds) == 0 {
		return Distribution{}, fmt.Errorf("%s holds no duration: want durations in ms, one per line", path)
	}
	return Measured(ds), nil
}

// Measured is the distribution of measured durations: their percentiles,
// interpolated between neighbours.
func Measured(ds []time.Duration) Distribution {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	q := make([]time.Duration, QuantileCount)
	for i := range q {
		q[i] = interpolate(sorted, float64(i)/float64(QuantileCount-1))
	}
	return Distribution{Min: q[0], Max: q[len(q)-1], Quantiles: q}
}

// interpolate is the p-quantile (0 <= p <= 1) of sorted values, linear
// between the two nearest.
func interpolate(sorted []time.Duration, p float64) time.Duration {
	pos := p * float64(len(sorted)-1)
	i := int(pos)
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	frac := pos - float64(i)
	return sorted[i] + time.Duration(frac*float64(sorted[i+1]-sorted[i]))
}

func parseQuantiles(s string) (Distribution, error) {
	parts := strings.Split(strings.TrimPrefix(s, quantilesPrefix), "/")
	if len(parts) != QuantileCount {
		return Distribution{}, fmt.Errorf("%q: a measured distribution has %d quantiles, not %d", abbreviate(s), QuantileCount, len(parts))
	}
	q := make([]time.Duration, len(parts))
	for i, p := range parts {
		d, err := time.ParseDuration(p)
		if err != nil || d < 0 || (i > 0 && d < q[i-1]) {
			return Distribution{}, fmt.Errorf("%q: quantile %d (%q) is not a duration at least the one before it", abbreviate(s), i, p)
		}
		q[i] = d
	}
	return Distribution{Min: q[0], Max: q[len(q)-1], Quantiles: q}, nil
}

func abbreviate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// String is the form ParseDistribution reads back: "20ms", "10ms-50ms", or
// a measured distribution's quantiles.
func (d Distribution) String() string {
	if len(d.Quantiles) > 0 {
		parts := make([]string, len(d.Quantiles))
		for i, q := range d.Quantiles {
			parts[i] = q.String()
		}
		return quantilesPrefix + strings.Join(parts, "/")
	}
	if d.Min == d.Max {
		return d.Min.String()
	}
	return d.Min.String() + "-" + d.Max.String()
}

// Fixed reports whether every draw is the same duration.
func (d Distribution) Fixed() bool { return d.Min == d.Max }

// Quantile is the p-quantile (0 <= p <= 1) of the durations drawn.
func (d Distribution) Quantile(p float64) time.Duration {
	p = min(max(p, 0), 1)
	if len(d.Quantiles) > 0 {
		return interpolate(d.Quantiles, p)
	}
	return d.Min + time.Duration(p*float64(d.Max-d.Min))
}

// Draw is one duration of the distribution: uniform in a range, or the
// quantile of a uniform draw of a measured distribution.
func (d Distribution) Draw(rng *rand.Rand) time.Duration {
	switch {
	case len(d.Quantiles) > 0:
		return d.Quantile(rng.Float64())
	case d.Max <= d.Min:
		return d.Min
	}
	return d.Min + time.Duration(rng.Int64N(int64(d.Max-d.Min)+1))
}
