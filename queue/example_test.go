package queue_test

import (
	"context"
	"fmt"
	"log"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/queue"
)

// A front end enqueues a spreadsheet's create and two updates; a worker
// (run as many as you like, in as many processes) creates the sheet, then
// applies both updates in one job.
func Example() {
	ctx := context.Background()
	// In production: client, err := spanner.NewClient(ctx, "projects/P/instances/I/databases/D"),
	// with the schema of ddl.Statements and ddl.RequestsStatements applied.
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
	// The front end. Requests enqueued in one call share a commit
	// timestamp and are ordered by id among themselves: these ids keep
	// the updates in order (left empty, ids are random UUIDs).
	ids, err := q.Enqueue(ctx,
		queue.Request{ID: "sheet-42-0", Kind: queue.KindCreate, Resource: "sheet-42", Payload: []byte("title=Budget")},
		queue.Request{ID: "sheet-42-1", Kind: queue.KindUpdate, Resource: "sheet-42", Payload: []byte("A1=100")},
		queue.Request{ID: "sheet-42-2", Kind: queue.KindUpdate, Resource: "sheet-42", Payload: []byte("A2=200")})
	if err != nil {
		log.Fatal(err)
	}

	// The back end.
	updated := make(chan struct{})
	w, err := q.NewWorker(func(ctx context.Context, job *queue.Job) error {
		fmt.Printf("%s %s: %d request(s), token %d\n", job.Kind, job.Resource, len(job.Requests), job.Token())
		for _, r := range job.Requests {
			fmt.Printf("  %s\n", r.Payload)
		}
		if job.Kind == queue.KindUpdate {
			close(updated)
		}
		return nil // create or update the sheet here, fenced with job.Token()
	})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error)
	go func() { stopped <- w.Run(runCtx) }()
	<-updated
	stop() // a graceful stop: the job in flight is recorded first
	if err := <-stopped; err != nil {
		log.Fatal(err)
	}

	for _, id := range ids {
		r, err := q.Get(ctx, id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %s: %s\n", r.Kind, r.Payload, r.Status)
	}
	// Output:
	// create sheet-42: 1 request(s), token 1
	//   title=Budget
	// update sheet-42: 2 request(s), token 1
	//   A1=100
	//   A2=200
	// create title=Budget: complete
	// update A1=100: complete
	// update A2=200: complete
}
