package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/queue"
)

// Enqueue refuses, writing nothing, a second create of a resource and an
// update of a resource never created.
func ExampleQueue_Enqueue() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // always bound ctx
	defer cancel()
	requests, err := ddl.RequestsStatements(ddl.DefaultRequestsTable)
	if err != nil {
		log.Fatal(err)
	}
	emu, err := emulator.Start(ctx, emulator.WithDDL(requests...))
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()
	q, err := queue.New(emu.Client())
	if err != nil {
		log.Fatal(err)
	}

	_, err = q.Enqueue(ctx, queue.Request{Kind: queue.KindCreate, Resource: "sheet-7"})
	fmt.Println("create:", err)
	_, err = q.Enqueue(ctx, queue.Request{Kind: queue.KindCreate, Resource: "sheet-7"})
	var dup *queue.DuplicateCreateError
	fmt.Println("second create refused:", errors.As(err, &dup))
	_, err = q.Enqueue(ctx, queue.Request{Kind: queue.KindUpdate, Resource: "sheet-8", Payload: []byte("A1=1")})
	fmt.Println("update without create refused:", errors.Is(err, queue.ErrNoCreate))
	// Output:
	// create: <nil>
	// second create refused: true
	// update without create refused: true
}
