package migrations

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSplitStatements(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"CREATE TABLE A (X INT64) PRIMARY KEY (X)", []string{"CREATE TABLE A (X INT64) PRIMARY KEY (X)"}},
		{"A;\n\n B ;;", []string{"A", "B"}},
		{"-- a comment; with a semicolon\nA; # another; one\nB", []string{"A", "B"}},
		{"A /* x; y */ B; C", []string{"A   B", "C"}},
		{`UPDATE T SET S = 'a;b' WHERE U = "c;d"; X`, []string{`UPDATE T SET S = 'a;b' WHERE U = "c;d"`, "X"}},
		{`SELECT 'it\'s;'; Y`, []string{`SELECT 'it\'s;'`, "Y"}},
		{"SELECT '''a;\nb'''; Z", []string{"SELECT '''a;\nb'''", "Z"}},
		{"-- only a comment\n", nil},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, splitStatements(tc.in), "%q", tc.in)
	}
}

func TestIsDML(t *testing.T) {
	assert.True(t, isDML("\n  -- spanmutex:dml\nUPDATE T SET X = 1 WHERE TRUE"))
	assert.True(t, isDML("-- SPANMUTEX:DML\n"))
	assert.False(t, isDML("-- a comment first\n-- spanmutex:dml\nUPDATE"))
	assert.False(t, isDML("CREATE TABLE T (X INT64) PRIMARY KEY (X)"))
}
