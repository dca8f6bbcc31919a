package spanmutex_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/emulator"
)

// Run a schema migration exactly once across every replica of a service.
// Each replica runs the same code; one runs the section, the others get
// AlreadyDone.
func Example() {
	ctx := context.Background()
	// In production: client, err := spanner.NewClient(ctx, "projects/P/instances/I/databases/D")
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	for replica := 1; replica <= 3; replica++ {
		m, err := spanmutex.New(emu.Client(), "migrations/0042-add-orders-index")
		if err != nil {
			log.Fatal(err)
		}
		out, err := m.Run(ctx, func(ctx context.Context, lease *spanmutex.Lease) error {
			fmt.Printf("replica %d migrates, fencing token %d\n", replica, lease.Token())
			return nil // apply the migration here
		})
		fmt.Printf("replica %d: %v %v\n", replica, out, err)
	}
	// Output:
	// replica 1 migrates, fencing token 1
	// replica 1: Executed <nil>
	// replica 2: AlreadyDone <nil>
	// replica 3: AlreadyDone <nil>
}

// A section that fails is recorded FAILED with its error and retried by the
// next caller, until the attempt limit.
func ExampleMutex_Run_failure() {
	ctx := context.Background()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	m, err := spanmutex.New(emu.Client(), "backfill", spanmutex.WithMaxAttempts(2))
	if err != nil {
		log.Fatal(err)
	}
	flaky := func(ctx context.Context, lease *spanmutex.Lease) error {
		return fmt.Errorf("attempt with token %d: quota exceeded", lease.Token())
	}
	for i := 0; i < 3; i++ {
		out, err := m.Run(ctx, flaky)
		var sectionErr *spanmutex.SectionError
		switch {
		case errors.As(err, &sectionErr):
			fmt.Println(out, "- the section failed:", sectionErr.Err)
		case errors.Is(err, spanmutex.ErrAttemptsExhausted):
			fmt.Println(out, "- gave up:", err)
		}
	}
	// Output:
	// Executed - the section failed: attempt with token 1: quota exceeded
	// Executed - the section failed: attempt with token 2: quota exceeded
	// NoOutcome - gave up: spanmutex: section "backfill": gave up after 2 of 2 attempts: last error: attempt with token 2: quota exceeded
}

// WithNeeded skips the section, without touching Spanner's row, when there is
// nothing to do.
func ExampleWithNeeded() {
	ctx := context.Background()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	pendingMigrations := 0
	m, err := spanmutex.New(emu.Client(), "migrations",
		spanmutex.WithNeeded(func(ctx context.Context) (bool, error) { return pendingMigrations > 0, nil }),
		spanmutex.WithLease(30*time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	out, err := m.Run(ctx, func(ctx context.Context, lease *spanmutex.Lease) error { return nil })
	fmt.Println(out, err)
	// Output:
	// NotNeeded <nil>
}

// Inspect shows every section's row, as `spanmutex status` does.
func ExampleInspect() {
	ctx := context.Background()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	m, err := spanmutex.New(emu.Client(), "nightly-report", spanmutex.WithOwner("reporter-7"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := m.Run(ctx, func(ctx context.Context, lease *spanmutex.Lease) error { return nil }); err != nil {
		log.Fatal(err)
	}
	rows, err := spanmutex.Inspect(ctx, emu.Client(), "")
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range rows {
		fmt.Println(r.Name, r.State, r.Owner, r.Token, r.Attempts)
	}
	// Output:
	// nightly-report DONE reporter-7 1 1
}

// Hold a reusable lock, one holder at a time, in FIFO order. The Locks of
// one process share a Scope; a Lock in another Scope is another process.
func ExampleLock_Lock() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // always bound ctx
	defer cancel()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	scope := spanmutex.NewScope() // one per process
	l, err := spanmutex.NewLock(emu.Client(), "sheets/1234", spanmutex.WithScope(scope))
	if err != nil {
		log.Fatal(err)
	}
	lease, err := l.Lock(ctx)
	if err != nil {
		log.Fatal(err) // matches spanmutex.ErrNotObtained if ctx ended first
	}
	fmt.Println("holding with token", lease.Token())

	// Another replica (its own Scope) cannot take it meanwhile.
	other, err := spanmutex.NewLock(emu.Client(), "sheets/1234", spanmutex.WithOwner("replica-2"))
	if err != nil {
		log.Fatal(err)
	}
	_, err = other.TryLock(ctx)
	fmt.Println("the other replica:", errors.Is(err, spanmutex.ErrHeld))

	if err := l.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	lease, err = other.TryLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the other replica holds it with token", lease.Token())
	if err := other.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// holding with token 1
	// the other replica: true
	// the other replica holds it with token 2
}

// A Scope per process: its Locks coordinate in memory, and it listens for
// wake-ups from other processes' Unlocks while its waiters wait (on an
// ephemeral UDP port of the host's own address; Addr says which once it
// does). Where processes cannot reach one another over UDP, turn that off
// and let waiters poll.
func ExampleNewScope() {
	scope := spanmutex.NewScope() // listens on demand
	defer scope.Close()
	fmt.Println("listening before any waiter:", scope.Addr() != "")

	polling := spanmutex.NewScope(spanmutex.WithoutWakeUps())
	fmt.Println("listening without wake-ups:", polling.Addr() != "")
	// Output:
	// listening before any waiter: false
	// listening without wake-ups: false
}

// Where no wake-up can reach a process (a serverless platform, a network
// that drops UDP), its waiters poll: by default sparingly (about 4 reads a
// second behind a long hold, the hand-off learnt up to 300ms late).
// WithHeadPoll chooses the other trade.
func ExampleWithHeadPoll() {
	ctx := context.Background()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()
	// At most 50ms between reads at the head of the queue: up to 20 reads
	// a second per waiting call, hand-offs learnt within about 50ms.
	prompt := spanmutex.NewScope(spanmutex.WithoutWakeUps(), spanmutex.WithHeadPoll(50*time.Millisecond))
	l, err := spanmutex.NewLock(emu.Client(), "nightly-report", spanmutex.WithScope(prompt))
	if err != nil {
		log.Fatal(err)
	}
	lease, err := l.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("token:", lease.Token())
	if err := l.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// token: 1
}

// ListenScope listens at once, at an address of your choice, until Close.
func ExampleListenScope() {
	scope, err := spanmutex.ListenScope("127.0.0.1:0", "")
	if err != nil {
		log.Fatal(err)
	}
	defer scope.Close()
	fmt.Println("listening:", scope.Addr() != "")
	// Output:
	// listening: true
}

// At start-up, Ping tells at once whether Spanner answers, and if not, why.
func ExamplePing() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // fail fast
	defer cancel()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	if err := spanmutex.Ping(ctx, emu.Client()); err != nil {
		// errors.Is(err, spanmutex.ErrNotFound): the database or its
		// instance does not exist; spanmutex.ErrUnreachable: the message
		// names the host and the cause (refused, DNS, TLS, credentials).
		log.Fatal(err)
	}
	fmt.Println("Spanner answers")
	// Output: Spanner answers
}

// A replica that owns many shards holds a lock for each: through its
// Scope's session, keeping them all costs one Commit every third of the
// lease, not two RPCs per lock. Losing the session loses every lock held
// through it, each Done closing.
func ExampleWithSessions() {
	ctx := context.Background()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()
	replica := spanmutex.NewScope(spanmutex.WithSessions())
	var shards []*spanmutex.Lock
	for i := range 3 {
		l, err := spanmutex.NewLock(emu.Client(), fmt.Sprintf("shards/%d", i), spanmutex.WithScope(replica))
		if err != nil {
			log.Fatal(err)
		}
		if _, err := l.Lock(ctx); err != nil {
			log.Fatal(err)
		}
		shards = append(shards, l)
	}
	fmt.Println("holding", len(shards), "shards")
	for _, l := range shards {
		if err := l.Unlock(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output: holding 3 shards
}
