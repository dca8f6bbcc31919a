package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/cmdline"
	"github.com/spanmutex/spanmutex/internal/names"
)

// TestStatusColumnWidth: one 256-character name does not widen every row:
// names and owners are cut to maxColumn characters with "…", and --wide
// (or asking for the one NAME) shows them in full.
func TestStatusColumnWidth(t *testing.T) {
	long := strings.Repeat("n", names.MaxLength)
	rows := []spanmutex.Record{
		{Name: long, State: spanmutex.StateDone, Owner: strings.Repeat("o", 200), Token: 1},
		{Name: "short", State: spanmutex.StateNeeded},
	}
	var narrow, wide bytes.Buffer
	writeStatus(&narrow, rows, false)
	writeStatus(&wide, rows, true)
	for _, line := range strings.Split(strings.TrimRight(narrow.String(), "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n > 2*maxColumn+80 {
			t.Errorf("a line of %d characters without --wide:\n%s", n, line)
		}
	}
	if want := strings.Repeat("n", maxColumn-1) + "…"; !strings.Contains(narrow.String(), want) {
		t.Errorf("the long name is not cut to %d characters with \"…\":\n%s", maxColumn, narrow.String())
	}
	if strings.Contains(narrow.String(), long) {
		t.Errorf("the long name is shown in full without --wide")
	}
	if !strings.Contains(wide.String(), long) || !strings.Contains(wide.String(), strings.Repeat("o", 200)) {
		t.Errorf("--wide does not show the name and owner in full:\n%s", wide.String())
	}
	if !strings.Contains(narrow.String(), "short  ") {
		t.Errorf("short names are changed:\n%s", narrow.String())
	}
}

// TestStatusWideFlag runs status on the emulator with a 256-character name.
func TestStatusWideFlag(t *testing.T) {
	needEmulator(t)
	t.Setenv(cmdline.EmulatorHostEnv, emu.Host())
	db := newDatabase(t)
	long := strings.Repeat("w", names.MaxLength)
	if code, _, stderr := cli(t, "run", "--database", db, long, "--", "true"); code != exitOK {
		t.Fatalf("run exited %d: %s", code, stderr)
	}
	_, narrow, _ := cli(t, "status", "--database", db)
	_, wide, _ := cli(t, "status", "--database", db, "--wide")
	_, one, _ := cli(t, "status", "--database", db, long)
	if strings.Contains(narrow, long) || !strings.Contains(narrow, strings.Repeat("w", maxColumn-1)+"…") {
		t.Errorf("status without --wide shows:\n%s", narrow)
	}
	if !strings.Contains(wide, long) || !strings.Contains(one, long) {
		t.Errorf("status --wide or status NAME do not show the full name:\n%s\n%s", wide, one)
	}
}

// TestWriteShared: below the table, a semaphore shows its size, the
// permits its live holders hold and its waiters, then each holder (a
// lapsed one as such), then each waiter with the permits it asks for and
// how long it has waited; a reader-writer lock shows its readers or
// writer, whether a writer waits, and which side each holder holds and
// each waiter asks for.
func TestWriteShared(t *testing.T) {
	rows := []sharedRow{
		{name: "render", size: 4, token: 7, waiters: 1, holders: []sharedHolder{
			{owner: "a", permits: 1, token: 5, left: 12300 * time.Millisecond},
			{owner: "b", permits: 2, token: 6, left: -time.Second},
			{owner: "", permits: 1, token: 7, left: 90 * time.Second},
		}},
		{name: "index", size: rwLockSize, token: 3, holders: []sharedHolder{{owner: "w", permits: rwLockSize, token: 3, left: time.Second}}},
		{name: "docs", size: rwLockSize, token: 2, waiters: 2, holders: []sharedHolder{
			{owner: "r1", permits: 1, token: 1, left: time.Second},
			{owner: "r2", permits: 1, token: 2, left: time.Second},
		}, waiting: []sharedHolder{
			{owner: "w", permits: rwLockSize, left: time.Minute, waited: 4200 * time.Millisecond},
			{owner: "r3", permits: 1, left: time.Minute, waited: 1500 * time.Millisecond},
		}},
		{name: "idle", size: 2, token: 9},
		{name: "full", size: 3, token: 4, waiters: 1, holders: []sharedHolder{
			{owner: "a", permits: 2, token: 4, left: time.Second},
		}, waiting: []sharedHolder{{owner: "", permits: 2, left: time.Minute, waited: 90 * time.Second}}},
	}
	var out bytes.Buffer
	writeShared(&out, rows, false)
	want := `
semaphore render: size 4, 2 held, 1 waiter
  OWNER  PERMITS  TOKEN  LEASE LEFT
  a      1        5      12.3s
  b      2        6      lapsed
  -      1        7      1m30s

reader-writer lock index: 1 writer, 0 waiters
  OWNER  HOLDS      TOKEN  LEASE LEFT
  w      exclusive  3      1.0s

reader-writer lock docs: 2 readers, 2 waiters; a writer waits, so new readers queue behind it
  OWNER  HOLDS   TOKEN  LEASE LEFT
  r1     shared  1      1.0s
  r2     shared  2      1.0s
  WAITER  WANTS      WAITED
  w       exclusive  4.2s
  r3      shared     1.5s

semaphore idle: size 2, 0 held, 0 waiters

semaphore full: size 3, 2 held, 1 waiter
  OWNER  PERMITS  TOKEN  LEASE LEFT
  a      2        4      1.0s
  WAITER  WANTS  WAITED
  -       2      1m30s
`
	if out.String() != want {
		t.Errorf("writeShared wrote:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestWriteStatusSharedRow: in the table, a semaphore's or RWLock's row
// shows the owners of its live holders (not "-": its own Owner column is
// never written) and "-" for the attempts, which it does not count; a row
// nobody holds shows "-" for both.
func TestWriteStatusSharedRow(t *testing.T) {
	rows := []spanmutex.Record{
		{Name: "docs", State: spanmutex.StateShared, Token: 2, Permits: rwLockSize, Holders: []spanmutex.Holder{
			{Owner: "r1", Permits: 1, Token: 1, LeaseLeft: time.Second},
			{Owner: "gone", Permits: 1, Token: 2, LeaseLeft: -time.Second},
			{Owner: "r2", Permits: 1, Token: 3, LeaseLeft: time.Second},
		}},
		{Name: "idle", State: spanmutex.StateShared, Token: 9, Permits: 2},
		{Name: "once", State: spanmutex.StateDone, Owner: "o", Token: 1, Attempts: 1},
	}
	var out bytes.Buffer
	writeStatus(&out, rows, false)
	want := `NAME  STATE   OWNER   TOKEN  ATTEMPTS  AGE   LAST ERROR
docs  SHARED  r1, r2  2      -         0.0s  -
idle  SHARED  -       9      -         0.0s  -
once  DONE    o       1      1         0.0s  -
`
	if out.String() != want {
		t.Errorf("writeStatus wrote:\n%s\nwant:\n%s", out.String(), want)
	}
}
