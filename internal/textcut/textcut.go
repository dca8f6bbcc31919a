// Package textcut shortens text for bounded STRING columns and logs.
package textcut

import "unicode/utf8"

// Cut returns s if it is at most n bytes long; else its longest prefix of
// at most n bytes that ends on a rune boundary (so that a STRING column
// gets valid UTF-8), followed by mark.
func Cut(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + mark
}

// Runes returns s if it is at most n characters long; else its first n-1
// characters followed by "…", so that it shows in n columns.
func Runes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
