package testutil

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	WaitFor(t, time.Minute, "the third call", func() bool { return calls.Add(1) >= 3 })
	if got := calls.Load(); got != 3 {
		t.Fatalf("cond called %d times; want 3", got)
	}
}

// failRecorder records a Fatalf instead of ending the test.
type failRecorder struct {
	testing.TB
	failed string
}

func (f *failRecorder) Helper() {}
func (f *failRecorder) Fatalf(format string, args ...any) {
	f.failed = format
	panic(f)
}

func TestWaitForFailsAtTheDeadline(t *testing.T) {
	rec := &failRecorder{TB: t}
	func() {
		defer func() {
			if r := recover(); r != rec {
				panic(r)
			}
		}()
		WaitFor(rec, 50*time.Millisecond, "never", func() bool { return false })
	}()
	if rec.failed == "" {
		t.Fatal("WaitFor did not fail the test when the condition never held")
	}
}

func TestGoroutinesCountsThoseNamingAMarker(t *testing.T) {
	stop := make(chan struct{})
	started := make(chan struct{})
	go parkedForTest(started, stop)
	<-started
	if got := Goroutines("testutil.parkedForTest"); got != 1 {
		t.Fatalf("Goroutines = %d; want 1", got)
	}
	close(stop)
	WaitFor(t, 5*time.Second, "the goroutine to end", func() bool { return Goroutines("testutil.parkedForTest") == 0 })
}

func parkedForTest(started, stop chan struct{}) {
	close(started)
	<-stop
}
