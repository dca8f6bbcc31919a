package sheets

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spanmutex/spanmutex/queue"
)

// DefaultMaxBatch is how many requests the front end enqueues in one
// transaction at most, unless WithMaxBatch says otherwise.
const DefaultMaxBatch = 64

// batchTimeout bounds one batch's Enqueue, whatever became of the HTTP
// requests waiting for it: their answers depend on its outcome.
const batchTimeout = 30 * time.Second

// batcher group-commits the front end's requests: requests that arrive
// while a batch is being committed wait and go together in the next one, a
// single Enqueue transaction. A busy front end thus makes one transaction per
// round trip instead of one per request, and an idle one adds no delay.
// Nothing runs while nothing is waiting: the committing goroutine exits when
// it finds no request pending.
type batcher struct {
	q   *queue.Queue
	max int

	mu      sync.Mutex
	pending []*enqueueCall
	running bool // a goroutine is committing batches

	transactions, requests, split, batched atomic.Int64 // for ServerStats
}

// enqueueCall is one request waiting for its batch.
type enqueueCall struct {
	req  queue.Request
	id   string
	err  error
	done chan struct{} // closed once id or err is set
}

// enqueue adds req to the next batch and returns its id once the batch
// committed, or the error that refused it. It waits for the outcome even if
// ctx ends, since the request may be committed all the same: the caller must
// not answer before it knows.
func (b *batcher) enqueue(ctx context.Context, req queue.Request) (string, error) {
	c := &enqueueCall{req: req, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	if !b.running {
		b.running = true
		go b.commitAll()
	}
	b.mu.Unlock()
	<-c.done
	return c.id, c.err
}

// commitAll commits batches until none is pending.
func (b *batcher) commitAll() {
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		n := min(len(b.pending), b.max)
		batch := b.pending[:n:n]
		b.pending = append([]*enqueueCall(nil), b.pending[n:]...)
		b.mu.Unlock()
		b.commit(batch)
	}
}

// commit enqueues batch in one transaction. Enqueue is all or none: if it
// refuses the batch because of one of its requests (a second create, an
// update with no create, a malformed request), nothing was written, and the
// batch is split in two halves committed in turn, the first first, until
// each refused request stands alone and gets its own answer. Any other error
// is every request's answer, as it would have been without batching.
func (b *batcher) commit(batch []*enqueueCall) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	b.requests.Add(int64(len(batch)))
	b.commitSplitting(ctx, batch)
}

// commitSplitting is commit's recursion.
func (b *batcher) commitSplitting(ctx context.Context, batch []*enqueueCall) {
	reqs := make([]queue.Request, len(batch))
	for i, c := range batch {
		reqs[i] = c.req
	}
	ids, err := b.q.Enqueue(ctx, reqs...)
	b.transactions.Add(1)
	switch {
	case err == nil:
		if len(batch) > 1 {
			b.batched.Add(int64(len(batch)))
		}
		for i, c := range batch {
			c.id = ids[i]
			close(c.done)
		}
	case len(batch) > 1 && refusal(err):
		b.split.Add(1)
		half := len(batch) / 2
		b.commitSplitting(ctx, batch[:half])
		b.commitSplitting(ctx, batch[half:])
	default:
		for _, c := range batch {
			c.err = err
			close(c.done)
		}
	}
}

// refusal reports whether err is Enqueue refusing a request, which writes
// nothing.
func refusal(err error) bool {
	return errors.Is(err, queue.ErrDuplicateCreate) || errors.Is(err, queue.ErrNoCreate) || errors.Is(err, queue.ErrInvalidRequest)
}

// ServerStats counts the front end's enqueue transactions.
type ServerStats struct {
	// Requests counts the requests the server tried to enqueue, and
	// Transactions the Enqueue calls it made for them.
	Requests, Transactions int64
	// Batched counts the requests enqueued together with others, in one
	// transaction.
	Batched int64
	// SplitBatches counts batches refused because of one of their requests,
	// and split in two.
	SplitBatches int64
}

// Stats returns the server's counts so far.
func (s *Server) Stats() ServerStats {
	return ServerStats{Requests: s.batch.requests.Load(), Transactions: s.batch.transactions.Load(),
		Batched: s.batch.batched.Load(), SplitBatches: s.batch.split.Load()}
}
