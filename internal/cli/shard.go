package cli

import (
	"fmt"
	"strconv"
	"strings"
)

// shard is a deterministic share of a matrix: its cells i with
// i % Of == Index-1, in the matrix's order. The zero shard is the whole.
type shard struct{ Index, Of int }

// parseShard reads --shard I/N; "" is the whole matrix.
func parseShard(s string) (shard, error) {
	if s == "" {
		return shard{Index: 1, Of: 1}, nil
	}
	i, n, ok := strings.Cut(s, "/")
	index, err1 := strconv.Atoi(i)
	of, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || of < 1 || index < 1 || index > of {
		return shard{}, fmt.Errorf("--shard %q: want I/N with 1 <= I <= N, such as 2/3 (the second of three shards)", s)
	}
	return shard{Index: index, Of: of}, nil
}

// owns reports whether cell i of the matrix belongs to the shard.
func (s shard) owns(i int) bool { return i%s.Of == s.Index-1 }

// shareOf is the shard's share of a matrix's cells, in their order: what
// compare --shard and soak --shard run.
func shareOf[C any](s shard, cells []C) []C {
	var mine []C
	for i, c := range cells {
		if s.owns(i) {
			mine = append(mine, c)
		}
	}
	return mine
}
