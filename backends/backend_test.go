package backends

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A program only some topologies run (a pooler) is needed only by a run
// whose params add it; every other program by every run.
func TestProgramNeededBy(t *testing.T) {
	always := Program{Name: "postgres"}
	pooler := Program{Name: "pgbouncer", Param: "pooler"}
	assert.True(t, always.NeededBy(nil))
	assert.False(t, pooler.NeededBy(map[string]string{}))
	assert.False(t, pooler.NeededBy(map[string]string{"pooler": ""}))
	assert.True(t, pooler.NeededBy(map[string]string{"pooler": "pgbouncer"}))
}

// A session name carries its node and the server's number for it, and
// reads back against the nodes a service handle knows.
func TestSessionNames(t *testing.T) {
	nodes := AddrsByName([]Endpoint{{Name: "pg-0", Ports: []int{5432}}})
	addr, id, err := SessionOn(nodes, SessionName("pg-0", 4711))
	assert.NoError(t, err)
	assert.Equal(t, "127.0.0.1:5432", addr)
	assert.Equal(t, int64(4711), id)
	for _, bad := range []string{"pg-1/4711", "pg-0", "pg-0/x"} {
		_, _, err := SessionOn(nodes, bad)
		assert.Error(t, err, bad)
	}
}
