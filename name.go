package spanmutex

import (
	"errors"
	"fmt"

	"github.com/spanmutex/spanmutex/internal/names"
)

// validateName is names.Name's rule, as an error wrapping
// ErrInvalidConfig.
func validateName(name string) error {
	if err := names.Name(name); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return nil
}

var errNilContext = errors.New("spanmutex: nil context; pass context.Background() or a context with a deadline")
