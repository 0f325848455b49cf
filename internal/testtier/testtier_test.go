package testtier

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPackageDir(t *testing.T) {
	assert.Equal(t, "./internal/testtier", packageDir())
}

func TestLongSkipsUnderShort(t *testing.T) {
	ran := false
	t.Run("sub", func(t *testing.T) {
		Long(t)
		ran = true
	})
	assert.Equal(t, !testing.Short(), ran, "Long skips exactly under -short")
}
