package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os/signal"
	"syscall"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/queue"
)

// A legacy order system writes the Orders table and cannot be changed.
// A change stream over Orders, read by a Capture, enqueues a request for
// every committed change: a create when an order is inserted, an update when
// it changes.
func ExampleQueue_NewCapture() {
	// The schema, for your migration tool (or `gcloud spanner databases ddl
	// update`): the queue, the stream, and the capture's checkpoints.
	requests, _ := ddl.RequestsStatements(ddl.DefaultRequestsTable)
	stream, _ := ddl.ChangeStream("Orders_CS", "Orders")
	checkpoints, _ := ddl.CaptureStatements(ddl.DefaultCaptureTable)
	_ = append(append(requests, stream), checkpoints...)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	client, err := spanner.NewClient(ctx, "projects/my-project/instances/my-instance/databases/orders")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	q, err := queue.New(client)
	if err != nil {
		log.Fatal(err)
	}

	// The mapper is a pure function of the change: it may see a change
	// more than once, and must make the same requests each time.
	mapper := func(ch queue.Change) ([]queue.Request, error) {
		var key struct{ OrderID string }
		if err := json.Unmarshal([]byte(ch.Keys), &key); err != nil {
			return nil, err
		}
		kind := queue.KindUpdate
		if ch.Mod == queue.ModInsert {
			kind = queue.KindCreate
		}
		return []queue.Request{{Kind: kind, Resource: "order/" + key.OrderID, Payload: []byte(ch.NewValues)}}, nil
	}
	capture, err := q.NewCapture(client, "Orders_CS", mapper, queue.WithQueryWindow(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	// Run until SIGTERM; a restart resumes from the checkpoints.
	err = capture.Run(ctx)
	var mapperErr *queue.MapperError
	switch {
	case errors.As(err, &mapperErr):
		log.Fatalf("fix the mapper for %s %s and restart: %v", mapperErr.Table, mapperErr.Keys, err)
	case !errors.Is(err, context.Canceled):
		log.Fatal(err)
	}
}

// The id of a captured request depends only on the change it came from, so
// that a change read twice is enqueued once; ids sort in commit order.
func ExampleCaptureRequestID() {
	ch := queue.Change{
		Stream: "Orders_CS", Table: "Orders", Mod: queue.ModUpdate, Keys: `{"OrderID":"o-1"}`,
		CommitTimestamp:     time.Date(2026, 11, 22, 3, 11, 10, 325059000, time.UTC),
		ServerTransactionID: "tx-9", RecordSequence: "00000001", ModIndex: 0,
	}
	first := queue.CaptureRequestID(ch, 0)
	fmt.Println(len(first), first == queue.CaptureRequestID(ch, 0))
	later := ch
	later.CommitTimestamp = ch.CommitTimestamp.Add(time.Millisecond)
	fmt.Println(first < queue.CaptureRequestID(later, 0))
	// Output:
	// 64 true
	// true
}
