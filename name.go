package spanmutex

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ValidateName reports whether name can name a critical section: 1 to
// MaxNameLength characters of valid UTF-8, with no control characters and no
// leading or trailing white space (" lead" and "lead" would be two sections
// that look like one).
func ValidateName(name string) error {
	if err := validateText("name", name, MaxNameLength); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if strings.TrimSpace(name) != name {
		return fmt.Errorf("%w: name %q starts or ends with white space; trim it", ErrInvalidConfig, name)
	}
	return nil
}

func validateText(what, s string, max int) error {
	if s == "" {
		return fmt.Errorf("%s is empty", what)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s %q is not valid UTF-8", what, s)
	}
	if n := utf8.RuneCountInString(s); n > max {
		return fmt.Errorf("%s is %d characters long; at most %d are allowed", what, n, max)
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%s %q has a control character at byte %d; use printable characters", what, s, i)
		}
	}
	return nil
}

var errNilContext = errors.New("spanmutex: nil context; pass context.Background() or a context with a deadline")
