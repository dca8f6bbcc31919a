package names

import (
	"strings"
	"testing"
)

func TestNameAndText(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
		says string
	}{
		{"migrations/0042", true, ""},
		{"", false, "name is empty"},
		{strings.Repeat("é", MaxLength), true, ""},
		{strings.Repeat("é", MaxLength+1), false, "at most 256 are allowed"},
		{"a\x00b", false, "control character at byte 1"},
		{"\xff", false, "not valid UTF-8"},
		{" lead", false, "starts or ends with white space"},
	} {
		err := Name(tc.name)
		if (err == nil) != tc.ok || err != nil && !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Name(%q) = %v; want ok=%v, saying %q", tc.name, err, tc.ok, tc.says)
		}
	}
	if err := Text("owner", " padded ", MaxLength); err != nil {
		t.Errorf("Text allows white space at the ends, which only names refuse: %v", err)
	}
}
