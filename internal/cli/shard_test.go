package cli

import (
	"fmt"
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

// soak --shard takes its share of the matrix of --backends × --workloads,
// backends first, as compare does of its own; without a matrix a soak is
// the one of --backend and --workload.
func TestSoakMatrixShards(t *testing.T) {
	f := soakFlags{backends: "redis,redis/setnx-expire", workloads: "fenced,unfenced"}
	names := func(cells []soakFlags) []string {
		var out []string
		for _, c := range cells {
			out = append(out, c.backend+"/"+c.variant+" "+c.workload)
		}
		return out
	}
	all, err := f.matrix()
	require.NoError(t, err)
	assert.Equal(t, []string{"redis/correct fenced", "redis/correct unfenced", "redis/setnx-expire fenced", "redis/setnx-expire unfenced"}, names(all))
	var joined []string
	for i := 1; i <= 3; i++ {
		f.shard = fmt.Sprintf("%d/3", i)
		mine, err := f.matrix()
		require.NoError(t, err)
		joined = append(joined, names(mine)...)
	}
	assert.ElementsMatch(t, names(all), joined, "three shards run the matrix once")
	f.shard = "1/3"
	mine, err := f.matrix()
	require.NoError(t, err)
	assert.Equal(t, []string{"redis/correct fenced", "redis/setnx-expire unfenced"}, names(mine))

	one, err := soakFlags{runFlags: runFlags{backend: "redis", workload: "unfenced"}}.matrix()
	require.NoError(t, err)
	require.Len(t, one, 1)
	assert.Equal(t, "redis", one[0].backend)
	assert.Equal(t, "unfenced", one[0].workload)
}
