package faketime

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The clock file holds the offset in libfaketime's relative format.
func TestWallClockWritesTheOffset(t *testing.T) {
	dir := t.TempDir()
	c := NewWallClock("redlock-3", dir, true)
	assert.Equal(t, File(dir), c.ClockFile())
	for _, tt := range []struct {
		offset time.Duration
		file   string
	}{
		{20 * time.Second, "+20.000\n"},
		{-1500 * time.Millisecond, "-1.500\n"},
		{0, "+0.000\n"},
	} {
		require.NoError(t, c.SetClock(tt.offset))
		data, err := os.ReadFile(c.ClockFile())
		require.NoError(t, err)
		assert.Equal(t, tt.file, string(data))
		assert.Equal(t, tt.offset, c.Clock())
	}
}

// A node on the real clock has no clock to move.
func TestWallClockOfARealClockRefuses(t *testing.T) {
	c := NewWallClock("redis-0", t.TempDir(), false)
	err := c.SetClock(time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "redis-0 runs on the real clock")
	assert.Zero(t, c.Clock())
}
