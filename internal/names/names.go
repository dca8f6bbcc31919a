// Package names holds, once for every package of spanmutex, the rules for
// the text it stores: names of sections and locks, owner identities,
// values, resources.
package names

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLength is the longest name, owner identity or value, in characters:
// the columns are STRING(256).
const MaxLength = 256

// Text reports whether s, called what in the error, is 1 to max
// characters of valid UTF-8 with no control characters.
func Text(what, s string, max int) error {
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

// Name reports whether name can name a critical section, lock or
// semaphore: Text with MaxLength, and no leading or trailing white space
// (" lead" and "lead" would be two sections that look like one).
func Name(name string) error {
	if err := Text("name", name, MaxLength); err != nil {
		return err
	}
	if strings.TrimSpace(name) != name {
		return fmt.Errorf("name %q starts or ends with white space; trim it", name)
	}
	return nil
}
