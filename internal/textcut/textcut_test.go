package textcut

import (
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exact", 5, "exact"},
		{"abcdef", 3, "abc…"},
		{"héllo", 2, "h…"}, // é is 2 bytes (1-2): cut before it
		{"héllo", 3, "hé…"},
		{"日本語", 4, "日…"},
		{"日本語", 0, "…"},
	} {
		got := Cut(tc.s, tc.n, "…")
		if got != tc.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Cut(%q, %d) = %q: not valid UTF-8", tc.s, tc.n, got)
		}
	}
}

func TestRunes(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exact", 5, "exact"},
		{"abcdef", 3, "ab…"},
		{"日本語です", 3, "日本…"},
	} {
		if got := Runes(tc.s, tc.n); got != tc.want {
			t.Errorf("Runes(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
