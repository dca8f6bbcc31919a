//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/cmdline"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

// holdScript is the COMMAND of the holders these tests start: it writes
// its token to $READY, then holds until $RELEASE exists.
const holdScript = `echo "$SPANMUTEX_TOKEN" > "$READY.tmp"; mv "$READY.tmp" "$READY"; while [ ! -e "$RELEASE" ]; do sleep 0.05; done`

// holders starts "spanmutex lock" processes with the flags kind on one
// name, each running holdScript until release is called.
type holders struct {
	t        *testing.T
	db, name string
	kind     []string
	dir      string
}

// newHolders returns holders of a new name in a new database of dialect d.
func newHolders(t *testing.T, d ddl.Dialect, kind ...string) *holders {
	t.Helper()
	return &holders{t: t, db: testutil.NewDatabase(t, emu, d), name: uniqueName(t), kind: kind, dir: t.TempDir()}
}

// start starts a holder recorded as owner, with more flags.
func (h *holders) start(owner string, more ...string) *process {
	h.t.Helper()
	args := append([]string{"lock", "--database", h.db, "--owner", owner}, h.kind...)
	args = append(append(args, more...), h.name, "--", "sh", "-c", holdScript)
	return startProcess(h.t, []string{"READY=" + h.ready(owner), "RELEASE=" + filepath.Join(h.dir, "release")}, args...)
}

// ready is the file owner's COMMAND writes its token to once it holds.
func (h *holders) ready(owner string) string { return filepath.Join(h.dir, "ready-"+owner) }

// token returns the token owner's COMMAND ran with.
func (h *holders) token(owner string) string {
	h.t.Helper()
	b, err := os.ReadFile(h.ready(owner))
	if err != nil {
		h.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// notHolding fails the test if owner's COMMAND runs.
func (h *holders) notHolding(owner string) {
	h.t.Helper()
	if _, err := os.Stat(h.ready(owner)); err == nil {
		h.t.Fatalf("%s's COMMAND runs", owner)
	}
}

// release ends every holdScript, and waits for each of procs to exit 0.
func (h *holders) release(procs ...*process) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, "release"), nil, 0o644); err != nil {
		h.t.Fatal(err)
	}
	for _, p := range procs {
		if code := p.wait(h.t, 60*time.Second); code != 0 {
			h.t.Errorf("%v exited %d; stderr:\n%s", p.cmd.Args, code, p.stderr.String())
		}
	}
}

// waitWaiters waits, while p runs, until name has n live waiters.
func (h *holders) waitWaiters(p *process, n int64) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := emu.NewClient(ctx, h.db)
	if err != nil {
		h.t.Fatal(err)
	}
	defer client.Close()
	waitWhileRunning(h.t, p, "a waiter", 30*time.Second, func() bool {
		r := sharedOf(h.t, client, h.name)
		return r.waiters == n
	})
}

// sharedOf returns name's SHARED row as status reads it.
func sharedOf(t *testing.T, client *spanner.Client, name string) sharedRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := spanmutex.Inspect(ctx, client, name)
	if err != nil {
		t.Fatal(err)
	}
	rows := sharedRows(recs)
	if len(rows) != 1 {
		return sharedRow{}
	}
	return rows[0]
}

// statusLines runs "status NAME" and returns its stdout's lines.
func (h *holders) statusLines() []string {
	h.t.Helper()
	code, stdout, stderr := cli(h.t, "status", "--database", h.db, h.name)
	if code != exitOK || stderr != "" {
		h.t.Fatalf("status: exit %d; stderr:\n%s", code, stderr)
	}
	return strings.Split(strings.TrimRight(stdout, "\n"), "\n")
}

// hasLine fails the test unless one of lines matches the regular
// expression re.
func hasLine(t *testing.T, lines []string, re string) {
	t.Helper()
	for _, l := range lines {
		if regexp.MustCompile(re).MatchString(l) {
			return
		}
	}
	t.Errorf("no line matches %s:\n%s", re, strings.Join(lines, "\n"))
}

// lineIndex returns the index of the first of lines that matches the
// regular expression re, or -1.
func lineIndex(lines []string, re string) int {
	for i, l := range lines {
		if regexp.MustCompile(re).MatchString(l) {
			return i
		}
	}
	return -1
}

// TestLockPermits: two "lock --permits 2" hold the semaphore at once, a
// third waits until they release it, and status shows the size, both
// holders with their tokens and the waiter.
func TestLockPermits(t *testing.T) {
	needEmulator(t)
	t.Setenv(cmdline.EmulatorHostEnv, emu.Host())
	for _, d := range []ddl.Dialect{ddl.GoogleSQL, ddl.PostgreSQL} {
		t.Run(d.String(), func(t *testing.T) {
			h := newHolders(t, d, "--permits", "2")
			a, b := h.start("a"), h.start("b")
			waitForFile(t, a, h.ready("a"), 30*time.Second)
			waitForFile(t, b, h.ready("b"), 30*time.Second)
			c := h.start("c")
			h.waitWaiters(c, 1)
			h.notHolding("c")

			lines := h.statusLines()
			// The holders' owners, and no attempts, which a semaphore does not count.
			hasLine(t, lines, `^`+regexp.QuoteMeta(h.name)+`\s+SHARED\s+(a, b|b, a)\s+2\s+-\s`)
			hasLine(t, lines, `^semaphore `+regexp.QuoteMeta(h.name)+`: size 2, 2 held, 1 waiter$`)
			hasLine(t, lines, `^\s+OWNER\s+PERMITS\s+TOKEN\s+LEASE LEFT$`)
			hasLine(t, lines, `^\s+a\s+1\s+`+h.token("a")+`\s+\d+\.\ds$`)
			hasLine(t, lines, `^\s+b\s+1\s+`+h.token("b")+`\s+\d+\.\ds$`)
			hasLine(t, lines, `^\s+WAITER\s+WANTS\s+WAITED$`)
			hasLine(t, lines, `^\s+c\s+1\s+\d+\.\ds$`)

			h.release(a, b, c)
			if got := h.token("c"); got != "3" {
				t.Errorf("the third holder ran with token %s, want 3", got)
			}
		})
	}
}

// TestLockPermitsWeight: a holder of --weight 2 of 3 permits leaves room
// for one of --weight 1, and a second of --weight 2 waits for it.
func TestLockPermitsWeight(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	h := newHolders(t, ddl.GoogleSQL, "--permits", "3")
	big, small := h.start("big", "--weight", "2"), h.start("small")
	waitForFile(t, big, h.ready("big"), 30*time.Second)
	waitForFile(t, small, h.ready("small"), 30*time.Second)
	next := h.start("next", "--weight", "2")
	h.waitWaiters(next, 1)
	h.notHolding("next")
	h.release(big, small, next)
}

// TestLockShared: two "lock --shared" share the reader-writer lock, a
// "lock --rw" waits until they are done, a third "--shared" waits behind
// it, and status shows the readers as the row's owners, that a writer
// waits, and the waiters in queue order with the side each asks for. The lock's stored size is rwLockSize, by which status tells
// a reader-writer lock.
func TestLockShared(t *testing.T) {
	needEmulator(t)
	t.Setenv(cmdline.EmulatorHostEnv, emu.Host())
	for _, d := range []ddl.Dialect{ddl.GoogleSQL, ddl.PostgreSQL} {
		t.Run(d.String(), func(t *testing.T) {
			h := newHolders(t, d)
			r1, r2 := h.start("r1", "--shared"), h.start("r2", "--rw", "--shared")
			waitForFile(t, r1, h.ready("r1"), 30*time.Second)
			waitForFile(t, r2, h.ready("r2"), 30*time.Second)
			w := h.start("w", "--rw")
			h.waitWaiters(w, 1)
			h.notHolding("w")
			r3 := h.start("r3", "--shared")
			h.waitWaiters(r3, 2)
			h.notHolding("r3") // behind the waiting writer

			lines := h.statusLines()
			hasLine(t, lines, `^`+regexp.QuoteMeta(h.name)+`\s+SHARED\s+(r1, r2|r2, r1)\s+2\s+-\s`)
			hasLine(t, lines, `^reader-writer lock `+regexp.QuoteMeta(h.name)+`: 2 readers, 2 waiters; a writer waits, so new readers queue behind it$`)
			hasLine(t, lines, `^\s+OWNER\s+HOLDS\s+TOKEN\s+LEASE LEFT$`)
			hasLine(t, lines, `^\s+r1\s+shared\s+`+h.token("r1")+`\s`)
			hasLine(t, lines, `^\s+r2\s+shared\s+`+h.token("r2")+`\s`)
			hasLine(t, lines, `^\s+WAITER\s+WANTS\s+WAITED$`)
			if wi, ri := lineIndex(lines, `^\s+w\s+exclusive\s+\d+\.\ds$`), lineIndex(lines, `^\s+r3\s+shared\s+\d+\.\ds$`); wi < 0 || ri < wi {
				t.Errorf("want the waiting writer w (exclusive), then the reader r3 (shared) behind it:\n%s", strings.Join(lines, "\n"))
			}

			h.release(r1, r2, w, r3)
			if got := h.token("w"); got != "3" {
				t.Errorf("the writer ran with token %s, want 3", got)
			}
			if got := h.token("r3"); got != "4" {
				t.Errorf("the reader behind the writer ran with token %s, want 4", got)
			}
			client, err := emu.NewClient(context.Background(), h.db)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			if size := sharedOf(t, client, h.name).size; size != rwLockSize {
				t.Errorf("an RWLock's row has size %d; status tells one by rwLockSize, %d", size, rwLockSize)
			}
		})
	}
}

// TestLockKindMismatch: a NAME held as another kind or size of lock than
// the flags say is refused on one line, with "spanmutex:" once, that names
// the kind found and the flags to give; COMMAND does not run. Among them a
// plain "lock" of a semaphore or reader-writer lock (the library said "use
// another name"), and "lock --rw" of a lock (the library said "semaphore",
// under "spanmutex: table Mutexes: spanmutex:").
func TestLockKindMismatch(t *testing.T) {
	needEmulator(t)
	t.Setenv(cmdline.EmulatorHostEnv, emu.Host())
	db, dir := newDatabase(t), t.TempDir()
	base := uniqueName(t)
	sem, rw, plain, once := base+"-sem", base+"-rw", base+"-lock", base+"-once"
	for _, args := range [][]string{{"lock", "--permits", "5", sem}, {"lock", "--rw", rw}, {"lock", plain}, {"run", once}} {
		if code, _, stderr := cli(t, append(append([]string{args[0], "--database", db}, args[1:]...), "--", "true")...); code != exitOK {
			t.Fatalf("%q: exit %d; stderr:\n%s", args, code, stderr)
		}
	}
	ran := filepath.Join(dir, "ran")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--permits", "3", sem}, `spanmutex: semaphore "` + sem + `" has 5 permits, not --permits 3: give --permits 5, or change its size with 'spanmutex resize --permits 3 ` + sem + `'`},
		{[]string{"--shared", sem}, `spanmutex: "` + sem + `" is a semaphore of 5 permits: hold it with --permits 5, or use another NAME`},
		{[]string{sem}, `spanmutex: "` + sem + `" is a semaphore of 5 permits: hold it with --permits 5, or use another NAME`},
		{[]string{"--permits", "2", rw}, `spanmutex: "` + rw + `" is a reader-writer lock: hold it with --shared or --rw, or use another NAME`},
		{[]string{rw}, `spanmutex: "` + rw + `" is a reader-writer lock: hold it with --shared or --rw, or use another NAME`},
		{[]string{"--rw", plain}, `spanmutex: "` + plain + `" is a lock, not a reader-writer lock: hold it without --shared or --rw, or use another NAME`},
		{[]string{"--shared", plain}, `spanmutex: "` + plain + `" is a lock, not a reader-writer lock: hold it without --shared or --rw, or use another NAME`},
		{[]string{"--permits", "2", plain}, `spanmutex: "` + plain + `" is a lock, not a semaphore: hold it without --permits or --weight, or use another NAME`},
		{[]string{once}, `spanmutex: "` + once + `" is a run-once section ('spanmutex run'; its row is DONE), which 'spanmutex lock' cannot hold with any flags: use another NAME`},
		{[]string{"--rw", once}, `spanmutex: "` + once + `" is a run-once section ('spanmutex run'; its row is DONE), which 'spanmutex lock' cannot hold with any flags: use another NAME`},
	} {
		code, _, stderr := cli(t, append(append([]string{"lock", "--database", db}, tc.args...), "--", "touch", ran)...)
		if code != exitError || stderr != tc.want+"\n" {
			t.Errorf("lock %q: exit %d, stderr:\n%s\nwant exit %d and the one line:\n%s", tc.args, code, stderr, exitError, tc.want)
		}
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("COMMAND ran")
	}
}

// TestResize changes a semaphore's size: holders of the old size are then
// refused and of the new one served; a waiter that now fits is granted at
// once. It refuses names that are no semaphore.
func TestResize(t *testing.T) {
	needEmulator(t)
	t.Setenv(cmdline.EmulatorHostEnv, emu.Host())
	h := newHolders(t, ddl.GoogleSQL, "--permits", "1")
	resize := func(size, name string) (int, string) {
		code, stdout, stderr := cli(t, "resize", "--database", h.db, "--permits", size, name)
		if stdout != "" || strings.Count(stderr, "\n") != 1 {
			t.Errorf("resize --permits %s %s: stdout %q, stderr not one line:\n%s", size, name, stdout, stderr)
		}
		return code, stderr
	}
	if code, stderr := resize("2", h.name); code != exitError || !strings.Contains(stderr, "no row for") {
		t.Errorf("resize of a new name: exit %d, stderr:\n%s", code, stderr)
	}

	first := h.start("first")
	waitForFile(t, first, h.ready("first"), 30*time.Second)
	second := h.start("second")
	h.waitWaiters(second, 1)
	h.notHolding("second")
	if code, stderr := resize("2", h.name); code != exitOK || !strings.Contains(stderr, "resized from 1 to 2 permits") {
		t.Fatalf("resize: exit %d, stderr:\n%s", code, stderr)
	}
	waitForFile(t, second, h.ready("second"), 30*time.Second) // granted while first holds
	h.release(first, second)

	if code, stderr := resize("2", h.name); code != exitOK || !strings.Contains(stderr, "already has 2 permits; nothing changed") {
		t.Errorf("resize to the same size: exit %d, stderr:\n%s", code, stderr)
	}
	if code, _, stderr := cli(t, "lock", "--database", h.db, "--permits", "2", h.name, "--", "true"); code != exitOK {
		t.Errorf("lock --permits 2 after the resize: exit %d; stderr:\n%s", code, stderr)
	}
	if code, _, stderr := cli(t, "lock", "--database", h.db, "--permits", "1", h.name, "--", "true"); code != exitError ||
		!strings.Contains(stderr, "has 2 permits, not --permits 1") {
		t.Errorf("lock --permits 1 after the resize: exit %d; stderr:\n%s", code, stderr)
	}

	rw, done := h.name+"-rw", h.name+"-done"
	for _, args := range [][]string{{"lock", "--rw", rw}, {"run", done}} {
		if code, _, stderr := cli(t, append(append([]string{args[0], "--database", h.db}, args[1:]...), "--", "true")...); code != exitOK {
			t.Fatalf("%q: exit %d; stderr:\n%s", args, code, stderr)
		}
	}
	if code, stderr := resize("2", rw); code != exitError || !strings.Contains(stderr, "is a reader-writer lock, which has no size to change") {
		t.Errorf("resize of an RWLock: exit %d, stderr:\n%s", code, stderr)
	}
	if code, stderr := resize("2", done); code != exitError || !strings.Contains(stderr, "is not a semaphore: its row is DONE") {
		t.Errorf("resize of a run-once section: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestLockPermitsLostStopsCommand freezes a semaphore's holder (SIGSTOP)
// past its lease, so that a waiter is granted its permit; when it
// resumes, it finds its lease lost, sends COMMAND SIGTERM and exits 76,
// as "lock" does for a lock.
func TestLockPermitsLostStopsCommand(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	db, name, dir := newDatabase(t), uniqueName(t), t.TempDir()
	ready, got := filepath.Join(dir, "READY"), filepath.Join(dir, "got")
	holder := startProcess(t, []string{"READY=" + ready, "FILE=" + got}, "lock", "--database", db, "--permits", "1", "--lease", "2s", name, "--", "sh", "-c",
		`trap 'echo got-term >> "$FILE"; exit 3' TERM; touch "$READY"; while :; do sleep 0.1; done`)
	waitForFile(t, holder, ready, 30*time.Second)
	pid := holder.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	second := startProcess(t, nil, "lock", "--database", db, "--permits", "1", "--lease", "2s", name, "--", "true")
	if code := second.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("second holder: exit %d; stderr:\n%s", code, second.stderr.String())
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := holder.wait(t, 30*time.Second); code != exitLeaseLost {
		t.Errorf("resumed holder exited %d, want %d; stderr:\n%s", code, exitLeaseLost, holder.stderr.String())
	}
	want := `the semaphore "` + name + `" (token 1) was lost while COMMAND ran`
	for _, say := range []string{"sent COMMAND SIGTERM", want} {
		if !strings.Contains(holder.stderr.String(), say) {
			t.Errorf("holder's stderr does not say %q:\n%s", say, holder.stderr.String())
		}
	}
	if lines := readLines(t, got); len(lines) != 1 || lines[0] != "got-term" {
		t.Errorf("the holder's COMMAND wrote %q; want \"got-term\"", lines)
	}
}

// TestLockPermitsWaiterInterrupted: SIGTERM to a waiting "lock --permits"
// stops the wait (exit 1, COMMAND not run) and takes its entry out of the
// queue, as for a lock.
func TestLockPermitsWaiterInterrupted(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	h := newHolders(t, ddl.GoogleSQL, "--permits", "1")
	holder := h.start("holder")
	waitForFile(t, holder, h.ready("holder"), 30*time.Second)
	waiter := h.start("waiter")
	h.waitWaiters(waiter, 1)
	if err := waiter.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waiter.wait(t, 30*time.Second); code != exitError ||
		!strings.Contains(waiter.stderr.String(), `interrupted by SIGTERM while waiting for the semaphore "`+h.name+`"; COMMAND did not run`) {
		t.Errorf("waiter: exit %d, stderr:\n%s", code, waiter.stderr.String())
	}
	h.notHolding("waiter")
	client, err := emu.NewClient(context.Background(), h.db)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if r := sharedOf(t, client, h.name); r.waiters != 0 || len(r.holders) != 1 {
		t.Errorf("after the waiter left: %d waiters, %d holders; want 0 and 1", r.waiters, len(r.holders))
	}
	h.release(holder)
}
