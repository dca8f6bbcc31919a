package main

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// TestSplitCommand splits at the first "--" only.
func TestSplitCommand(t *testing.T) {
	flagArgs, command, ok := splitCommand([]string{"--table", "T", "n", "--", "sh", "--", "x"})
	if !ok || !slices.Equal(flagArgs, []string{"--table", "T", "n"}) || !slices.Equal(command, []string{"sh", "--", "x"}) {
		t.Errorf("got %q %q %v", flagArgs, command, ok)
	}
	if _, _, ok := splitCommand([]string{"n", "sh"}); ok {
		t.Error("found a -- that is not there")
	}
}

// TestCommandStatus maps how COMMAND ended to the exit status a shell
// would report.
func TestCommandStatus(t *testing.T) {
	exitErr := func(script string) error {
		err := exec.Command("sh", "-c", script).Run()
		if err == nil {
			t.Fatalf("sh -c %q succeeded", script)
		}
		return fmt.Errorf("section: %w", err)
	}
	cases := []struct {
		err    error
		want   int
		failed bool
	}{
		{exitErr("exit 7"), 7, true},
		{exitErr("kill -TERM $$"), 128 + 15, true},
		{&startError{"x", exec.ErrNotFound}, 127, true},
		{&startError{"x", errors.New("permission denied")}, 126, true},
		{errors.New("other"), 0, false},
	}
	for _, tc := range cases {
		if got, failed := commandStatus(tc.err); got != tc.want || failed != tc.failed {
			t.Errorf("commandStatus(%v) = %d, %v; want %d, %v", tc.err, got, failed, tc.want, tc.failed)
		}
	}
}

// TestFormatting checks the status table's cell formatting.
func TestFormatting(t *testing.T) {
	if got := oneLine("a\n  b\tc", 10); got != "a b c" {
		t.Errorf("oneLine flattened to %q", got)
	}
	if got := oneLine("héllo wörld", 5); got != "héll…" {
		t.Errorf("oneLine cut to %q", got)
	}
	for d, want := range map[time.Duration]string{
		1234 * time.Millisecond:               "1.2s",
		90*time.Second + 400*time.Millisecond: "1m30s",
	} {
		if got := formatAge(d); got != want {
			t.Errorf("formatAge(%v) = %q, want %q", d, got, want)
		}
	}
}
