package spanmutex

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The default backoff's first pause is drawn around defaultInitialBackOff
// (randomised by half either way), then grows: it once began at the
// backoff library's own 500 ms, the fields being set after its reset.
func TestDefaultBackOffStartsAtItsInitialInterval(t *testing.T) {
	for range 100 {
		b := defaultBackOff()
		first := b.NextBackOff()
		assert.GreaterOrEqual(t, first, defaultInitialBackOff/2)
		assert.LessOrEqual(t, first, defaultInitialBackOff*3/2)
	}
}
