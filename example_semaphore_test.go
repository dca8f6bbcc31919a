package spanmutex_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/emulator"
)

// At most 2 replicas call a rate-limited API at once. Each replica makes
// its own Semaphore with the same name and size; a third is refused by
// TryAcquire (Acquire would wait) until a holder releases.
func ExampleSemaphore() {
	ctx := context.Background()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	var replicas []*spanmutex.Semaphore
	for range 3 {
		s, err := spanmutex.NewSemaphore(emu.Client(), "partner-api", 2)
		if err != nil {
			log.Fatal(err)
		}
		replicas = append(replicas, s)
	}
	for i, s := range replicas {
		lease, err := s.TryAcquire(ctx, 1)
		switch {
		case errors.Is(err, spanmutex.ErrHeld):
			fmt.Printf("replica %d waits: both permits are held\n", i+1)
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Printf("replica %d calls the API, token %d\n", i+1, lease.Token())
		}
	}
	if err := replicas[0].Release(ctx); err != nil {
		log.Fatal(err)
	}
	lease, err := replicas[2].Acquire(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("replica 3 calls the API, token %d\n", lease.Token())
	// Output:
	// replica 1 calls the API, token 1
	// replica 2 calls the API, token 2
	// replica 3 waits: both permits are held
	// replica 3 calls the API, token 3
}

// Readers share an index while a re-index, the writer, excludes them; a
// writer that waits blocks new readers, so it is never starved.
func ExampleRWLock() {
	ctx := context.Background()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	newLock := func() *spanmutex.RWLock {
		l, err := spanmutex.NewRWLock(emu.Client(), "search-index")
		if err != nil {
			log.Fatal(err)
		}
		return l
	}
	reader1, reader2, writer := newLock(), newLock(), newLock()
	r1, err := reader1.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r2, err := reader2.TryRLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("two readers share it, tokens", r1.Token(), r2.Token())
	_, err = writer.TryLock(ctx)
	fmt.Println("the writer is refused:", errors.Is(err, spanmutex.ErrHeld))
	for _, r := range []*spanmutex.RWLock{reader1, reader2} {
		if err := r.RUnlock(ctx); err != nil {
			log.Fatal(err)
		}
	}
	w, err := writer.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the writer re-indexes alone, token", w.Token())
	if err := writer.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// two readers share it, tokens 1 2
	// the writer is refused: true
	// the writer re-indexes alone, token 3
}
