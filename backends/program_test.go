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
