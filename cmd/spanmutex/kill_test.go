//go:build unix

package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex"
)

// killLease is the holders' lease: a killed holder blocks its name
// for this long (plus jitter) by Spanner's clock.
const killLease = 2 * time.Second

// TestKillHolderAtRandomPoints kills a "spanmutex run" holder, with its
// whole process group, at random points of its life (before its acquisition
// commits, after, while COMMAND runs, while it records DONE, after it has
// finished), then runs a fresh "spanmutex run" of the same name, which must
// complete. COMMAND appends $SPANMUTEX_TOKEN to a file: it may run more than
// once (a kill mid-section and a takeover), but at most once per
// acquisition, so the file's tokens strictly increase and none repeats; the
// row ends DONE with the token of the last run of COMMAND.
//
// The holder's COMMAND takes a second and writes its token after 0.3s, so
// that the holder lives about as long as the kill window and some kills
// land between its acquisition and its write. The kill delays are spread
// evenly over [0, 1.5s], each drawn at random within its share;
// SPANMUTEX_KILL_SEED sets the seed (default: the time, logged for a rerun).
func TestKillHolderAtRandomPoints(t *testing.T) {
	needEmulator(t)
	const iterations = 12
	const maxDelay = 1500 * time.Millisecond
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SPANMUTEX_KILL_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SPANMUTEX_KILL_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (rerun with SPANMUTEX_KILL_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	db := newDatabase(t)

	var (
		mu     sync.Mutex
		phases = map[string]int{} // where the kills landed
	)
	t.Cleanup(func() { t.Logf("where the kills landed: %v", phases) })
	for i := range iterations {
		share := maxDelay / iterations
		delay := time.Duration(i)*share + time.Duration(rng.Int64N(int64(share)))
		t.Run(fmt.Sprintf("%02d-kill-after-%v", i, delay.Round(time.Millisecond)), func(t *testing.T) {
			t.Parallel()
			phase := killOnce(t, db, delay)
			mu.Lock()
			phases[phase]++
			mu.Unlock()
		})
	}
}

// ranHere matches the line of a run whose COMMAND ran and recorded DONE.
var ranHere = regexp.MustCompile(`"[^"]*" ran here \(token (\d+), owner `)

// killOnce starts a holder of a name of its own, kills its process group
// after delay, runs a fresh holder to completion, checks the outcome, and
// returns where the kill landed.
func killOnce(t *testing.T, db string, delay time.Duration) string {
	name, dir := uniqueName(t), t.TempDir()
	file := filepath.Join(dir, "tokens")
	args := func(command string) []string {
		return []string{"run", "--database", db, "--lease", killLease.String(), name, "--", "sh", "-c", command}
	}
	holder := startProcess(t, []string{"FILE=" + file}, args(`sleep 0.3; echo "$SPANMUTEX_TOKEN" >> "$FILE"; sleep 0.7`)...)
	timer := time.NewTimer(delay)
	select {
	case <-timer.C:
		holder.killGroup()
	case <-holder.done:
		timer.Stop()
	}
	code := holder.wait(t, 30*time.Second)
	holderErr := holder.stderr.String()
	saneStderr(t, "killed holder", holderErr)

	// Where the kill landed, from the row and the file as the holder left them.
	phase := "too late: the holder had exited"
	rows := inspectAll(t, db, name)
	tokensBefore := readTokens(t, file)
	switch {
	case code == 0:
		if !strings.Contains(holderErr, "ran here") {
			t.Errorf("holder exited 0 without saying it ran here:\n%s", holderErr)
		}
	case code != -1 || !holder.cmd.ProcessState.Sys().(syscall.WaitStatus).Signaled():
		t.Fatalf("holder exited %d; want death by SIGKILL, or 0 if it finished first; stderr:\n%s", code, holderErr)
	case len(rows) == 0 || rows[0].State == spanmutex.StateNeeded:
		phase = "before the acquisition committed"
	case rows[0].State == spanmutex.StateStarted && len(tokensBefore) == 0:
		phase = "after the acquisition, before COMMAND wrote"
	case rows[0].State == spanmutex.StateStarted:
		phase = "while COMMAND ran or DONE was being recorded"
	case rows[0].State == spanmutex.StateDone:
		phase = "after DONE was recorded"
	default:
		t.Errorf("after the kill the row is %+v", rows[0])
	}

	fresh := startProcess(t, []string{"FILE=" + file}, args(`echo "$SPANMUTEX_TOKEN" >> "$FILE"`)...)
	fcode := fresh.wait(t, 45*time.Second)
	freshErr := fresh.stderr.String()
	saneStderr(t, "fresh run", freshErr)
	if fcode != 0 {
		t.Fatalf("fresh run exited %d; stderr:\n%s", fcode, freshErr)
	}

	tokens := readTokens(t, file)
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Errorf("COMMAND wrote tokens %v: they must strictly increase, none twice", tokens)
		}
	}
	row := inspect(t, db, name)
	if row.State != spanmutex.StateDone {
		t.Fatalf("row is %s after the fresh run; want DONE", row.State)
	}
	if len(tokens) == 0 || tokens[len(tokens)-1] != row.Token {
		t.Errorf("COMMAND wrote tokens %v; the DONE row has token %d, which must be the last", tokens, row.Token)
	}
	switch m := ranHere.FindStringSubmatch(freshErr); {
	case m != nil:
		if m[1] != strconv.FormatInt(row.Token, 10) {
			t.Errorf("fresh run says it ran with token %s; the DONE row has token %d", m[1], row.Token)
		}
		if len(tokens) != len(tokensBefore)+1 {
			t.Errorf("the fresh run ran COMMAND once: tokens %v before it, %v after", tokensBefore, tokens)
		}
	case strings.Contains(freshErr, "already done"):
		if len(tokens) != len(tokensBefore) || len(tokens) != 1 {
			t.Errorf("already done by the holder: COMMAND ran once, there; tokens %v before the fresh run, %v after", tokensBefore, tokens)
		}
		if code == -1 && phase != "after DONE was recorded" {
			t.Errorf("the fresh run found the section done, but the killed holder had left it %s", phase)
		}
	default:
		t.Errorf("fresh run says neither 'ran here' nor 'already done':\n%s", freshErr)
	}
	t.Logf("kill landed %s; COMMAND wrote tokens %v; final token %d", phase, tokens, row.Token)
	return phase
}

// readTokens returns the tokens COMMAND appended to path, in order.
func readTokens(t *testing.T, path string) []int64 {
	t.Helper()
	var out []int64
	for _, line := range readLines(t, path) {
		n, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			t.Fatalf("%s holds %q, not a token", path, line)
		}
		out = append(out, n)
	}
	return out
}

// saneStderr fails the test if stderr shows a crash rather than a message.
func saneStderr(t *testing.T, who, stderr string) {
	t.Helper()
	for _, bad := range []string{"panic:", "fatal error:", "goroutine ", "DATA RACE"} {
		if strings.Contains(stderr, bad) {
			t.Errorf("%s's stderr shows %q:\n%s", who, bad, stderr)
		}
	}
}
