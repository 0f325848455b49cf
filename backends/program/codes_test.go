package program

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/lockcheck/lockcheck/backends"
)

// Each error code of an acquire maps onto what the client loop records: a
// busy lock, a refusal by the service, a request the client sent nothing
// of (each a certain fail), or an unknown outcome.
func TestAcquireErrorCodes(t *testing.T) {
	tests := []struct {
		code                          int
		notAcquired, refused, notSent bool
	}{
		{code: CodeLockHeld, notAcquired: true},
		{code: CodeUnavailable, notAcquired: true, refused: true},
		{code: CodeNotSent, notAcquired: true, notSent: true},
		{code: CodeNotSupported, notAcquired: true, refused: true},
		{code: CodeTimeout},
		{code: CodeCrash},
		{code: 99},
	}
	for _, tt := range tests {
		err := &CodeError{Slot: "c0", Op: TypeAcquire, Code: tt.code}
		assert.Equal(t, tt.notAcquired, Definite(tt.code), "code %d definite", tt.code)
		assert.Equal(t, tt.notAcquired, err.Is(backends.ErrNotAcquired), "code %d: not acquired", tt.code)
		assert.Equal(t, tt.refused, err.Is(backends.ErrRefused), "code %d: refused by the service", tt.code)
		assert.Equal(t, tt.notSent, err.Is(backends.ErrNotSent), "code %d: not sent by the client", tt.code)
	}
	// A release is never a refusal: its failure leaves the loop not
	// knowing what it left.
	assert.False(t, (&CodeError{Op: TypeRelease, Code: CodeNotSent}).Is(backends.ErrNotAcquired))
}
