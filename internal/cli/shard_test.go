package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseShard(t *testing.T) {
	tests := []struct {
		in   string
		want shard
		err  bool
	}{
		{"", shard{1, 1}, false},
		{"1/3", shard{1, 3}, false},
		{"3/3", shard{3, 3}, false},
		{"0/3", shard{}, true},
		{"4/3", shard{}, true},
		{"1/0", shard{}, true},
		{"a/3", shard{}, true},
		{"2", shard{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseShard(tt.in)
			if tt.err {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "--shard")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Every cell belongs to exactly one shard, whatever the number of shards.
func TestShardsPartitionTheMatrix(t *testing.T) {
	for of := 1; of <= 5; of++ {
		for cell := range 23 {
			owners := 0
			for i := 1; i <= of; i++ {
				if (shard{i, of}).owns(cell) {
					owners++
				}
			}
			assert.Equal(t, 1, owners, "cell %d of %d shards", cell, of)
		}
	}
}
