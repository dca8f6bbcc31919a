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

// Two replicas campaign; the first leads, the second waits its turn and
// leads as soon as the first resigns. Any instance may ask who leads.
func ExampleElection() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // always bound ctx
	defer cancel()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	// In production each replica makes its own Election, in its own process.
	replica1, err := spanmutex.NewElection(emu.Client(), "scheduler")
	if err != nil {
		log.Fatal(err)
	}
	replica2, err := spanmutex.NewElection(emu.Client(), "scheduler")
	if err != nil {
		log.Fatal(err)
	}

	first, err := replica1.Campaign(ctx, "10.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	leader, err := replica2.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("leader %s, token %d\n", leader.Value, leader.Token)

	next := make(chan *spanmutex.Leadership)
	go func() {
		ld, err := replica2.Campaign(ctx, "10.0.0.2:8080") // waits while replica1 leads
		if err != nil {
			log.Fatal(err)
		}
		next <- ld
	}()
	// Leader-only work runs under first.Context() and fences its writes
	// with first.Lease().Guard or first.Lease().Token(); here it just steps down.
	if err := first.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	second := <-next
	fmt.Printf("leader %s, token %d\n", second.Value(), second.Lease().Token())
	fmt.Println("first term ended:", errors.Is(context.Cause(first.Context()), spanmutex.ErrResigned))
	if err := second.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// leader 10.0.0.1:8080, token 1
	// leader 10.0.0.2:8080, token 2
	// first term ended: true
}

// Observe reports every leadership term, in order, to any instance.
func ExampleElection_Observe() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	watcher, err := spanmutex.NewElection(emu.Client(), "sweeper")
	if err != nil {
		log.Fatal(err)
	}
	candidate, err := spanmutex.NewElection(emu.Client(), "sweeper")
	if err != nil {
		log.Fatal(err)
	}
	octx, stop := context.WithCancel(ctx)
	defer stop()
	terms := watcher.Observe(octx)
	for _, value := range []string{"a", "b", "c"} {
		ld, err := candidate.Campaign(ctx, value)
		if err != nil {
			log.Fatal(err)
		}
		if err := ld.Resign(ctx); err != nil {
			log.Fatal(err)
		}
	}
	for range 3 {
		t := <-terms
		fmt.Println(t.Value, t.Token)
	}
	// Output:
	// a 1
	// b 2
	// c 3
}

// A replica runs its leader-only loop under Run: it campaigns, calls
// OnStartedLeading once it leads, and hands leadership over to the next
// candidate when that returns.
func ExampleElection_Run() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // always bound ctx
	defer cancel()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	e, err := spanmutex.NewElection(emu.Client(), "compactor")
	if err != nil {
		log.Fatal(err)
	}
	err = e.Run(ctx, "replica-1", spanmutex.LeaderCallbacks{
		OnStartedLeading: func(ctx context.Context) {
			// Leader-only work: stop when ctx ends (leadership lost, or
			// Run's ctx ended). Here one pass, then step down.
			fmt.Println("leading; compacting once")
		},
		OnStoppedLeading: func() { fmt.Println("stopped leading") },
	})
	fmt.Println("Run returned:", err)
	_, err = e.Leader(ctx)
	fmt.Println("nobody leads now:", errors.Is(err, spanmutex.ErrNoLeader))
	// Output:
	// leading; compacting once
	// stopped leading
	// Run returned: <nil>
	// nobody leads now: true
}

// A replica whose Scope is made WithSessions holds its leadership and the
// locks it takes through one session: the term and every lock are kept
// alive by the session's one Commit every third of the lease, and losing
// the session ends the term (its Context) with the locks. Leader, in any
// process, judges the term by the session.
func ExampleElection_withSessions() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	replica := spanmutex.NewScope(spanmutex.WithSessions())
	e, err := spanmutex.NewElection(emu.Client(), "scheduler", spanmutex.WithScope(replica))
	if err != nil {
		log.Fatal(err)
	}
	ld, err := e.Campaign(ctx, "10.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	shard, err := spanmutex.NewLock(emu.Client(), "shards/0", spanmutex.WithScope(replica))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := shard.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	leader, err := e.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("leader %s, token %d, holding shards/0\n", leader.Value, leader.Token)
	if err := shard.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	if err := ld.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: leader 10.0.0.1:8080, token 1, holding shards/0
}
