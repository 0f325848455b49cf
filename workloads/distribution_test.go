package workloads

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDistribution(t *testing.T) {
	for _, tc := range []struct {
		in       string
		min, max time.Duration
		err      string
	}{
		{in: "20ms", min: 20 * time.Millisecond, max: 20 * time.Millisecond},
		{in: "400ms-1200ms", min: 400 * time.Millisecond, max: 1200 * time.Millisecond},
		{in: " 1s - 2s ", min: time.Second, max: 2 * time.Second},
		{in: "2s-1s", err: `"2s-1s" is not a duration (20ms), a range (10ms-50ms) or @FILE`},
		{in: "fast", err: `"fast" is not a duration`},
		{in: "-5ms", err: `is not a duration`},
		{in: "@/nonexistent/gc.txt", err: "read durations: open /nonexistent/gc.txt"},
		{in: "quantiles:1ms/2ms", err: "a measured distribution has 101 quantiles, not 2"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			d, err := ParseDistribution(tc.in)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.min, d.Min)
			assert.Equal(t, tc.max, d.Max)
			back, err := ParseDistribution(d.String())
			require.NoError(t, err)
			assert.Equal(t, d, back, "String reads back")
		})
	}
}

// A file of measured pauses (a GC log's, in ms) becomes their percentiles;
// its written form, which a worker is handed, reads back the same; draws
// follow it.
func TestMeasuredDurations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gc.txt")
	// 90 short pauses and 10 long ones: the busy-day tail.
	var text string
	for i := range 100 {
		ms := "12"
		if i >= 90 {
			ms = "900"
		}
		text += ms + "\n"
	}
	require.NoError(t, os.WriteFile(path, []byte("# G1 pauses, ms\n\n"+text), 0o644))
	d, err := ParseDistribution("@" + path)
	require.NoError(t, err)
	require.Len(t, d.Quantiles, QuantileCount)
	assert.Equal(t, 12*time.Millisecond, d.Min)
	assert.Equal(t, 900*time.Millisecond, d.Max)
	assert.Equal(t, 12*time.Millisecond, d.Quantile(0.5))
	assert.Equal(t, 900*time.Millisecond, d.Quantile(0.99))
	back, err := ParseDistribution(d.String())
	require.NoError(t, err)
	assert.Equal(t, d, back)

	rng := rand.New(rand.NewPCG(1, 2))
	long := 0
	for range 10_000 {
		x := d.Draw(rng)
		require.True(t, x >= d.Min && x <= d.Max, "%s outside the measured range", x)
		if x > 500*time.Millisecond {
			long++
		}
	}
	assert.InDelta(t, 1000, long, 250, "about a tenth of the draws are the long pauses")

	require.NoError(t, os.WriteFile(path, []byte("12\nlong\n"), 0o644))
	_, err = ParseDistribution("@" + path)
	assert.ErrorContains(t, err, path+`:2: "long" is not a duration in ms`)
	require.NoError(t, os.WriteFile(path, []byte("# nothing\n"), 0o644))
	_, err = ParseDistribution("@" + path)
	assert.ErrorContains(t, err, "holds no duration")
}

func TestDrawRange(t *testing.T) {
	d := Distribution{Min: 400 * time.Millisecond, Max: 1200 * time.Millisecond}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		x := d.Draw(rng)
		require.True(t, x >= d.Min && x <= d.Max)
	}
	assert.Equal(t, 800*time.Millisecond, d.Quantile(0.5))
	assert.Equal(t, 20*time.Millisecond, Distribution{Min: 20 * time.Millisecond, Max: 20 * time.Millisecond}.Draw(rng))
}
