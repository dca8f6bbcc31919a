package sheets

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/spanmutex/spanmutex/queue"
)

// Backend is the handler of the back end's queue workers: it does the
// spreadsheet work of each job in the store, fenced by the job's token as
// far as the store can tell. It is safe for concurrent use by many workers.
type Backend struct {
	store *Store

	jobs, creates, updates, clicks, failed atomic.Int64
}

// NewBackend returns the back end that writes to store.
func NewBackend(store *Store) (*Backend, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil *Store", ErrInvalidConfig)
	}
	return &Backend{store: store}, nil
}

// Handle is a queue.Handler. A create job creates the sheet; an update job
// applies every click the worker grouped into it, oldest first, in one
// write. Each write is keyed by the requests' ids, so that a job done again
// by the worker that took the sheet over from one that lost its lease after
// writing (and before recording the requests complete) is not applied
// twice. Its error (the store refused the write, or ctx ended while it was
// in flight) ends the job's requests in error with its text.
func (b *Backend) Handle(ctx context.Context, job *queue.Job) error {
	b.jobs.Add(1)
	err := b.handle(ctx, job)
	if err != nil {
		b.failed.Add(1)
	}
	return err
}

func (b *Backend) handle(ctx context.Context, job *queue.Job) error {
	switch job.Kind {
	case queue.KindCreate:
		if len(job.Requests) != 1 {
			return fmt.Errorf("sheets: a create job of sheet %q with %d requests; want 1", job.Resource, len(job.Requests))
		}
		if err := b.store.Create(ctx, job.Resource, job.Token(), job.Requests[0].ID); err != nil {
			return fmt.Errorf("sheets: create sheet %q with token %d: %w", job.Resource, job.Token(), err)
		}
		b.creates.Add(1)
		return nil
	case queue.KindUpdate:
		clicks := make([]Click, len(job.Requests))
		for i, r := range job.Requests {
			clicks[i] = Click{Key: r.ID, Payload: r.Payload}
		}
		if err := b.store.Update(ctx, job.Resource, job.Token(), clicks); err != nil {
			return fmt.Errorf("sheets: update sheet %q with %d click(s), token %d: %w", job.Resource, len(clicks), job.Token(), err)
		}
		b.updates.Add(1)
		b.clicks.Add(int64(len(clicks)))
		return nil
	}
	return fmt.Errorf("sheets: job of sheet %q has unknown kind %q", job.Resource, job.Kind)
}

// BackendStats counts what a Backend has done.
type BackendStats struct {
	Jobs    int64 // handler calls
	Creates int64 // sheets it created
	Updates int64 // update writes it applied
	Clicks  int64 // clicks in them: Clicks/Updates is the grouping
	Failed  int64 // jobs that returned an error
}

// Stats returns the counts so far.
func (b *Backend) Stats() BackendStats {
	return BackendStats{Jobs: b.jobs.Load(), Creates: b.creates.Load(), Updates: b.updates.Load(), Clicks: b.clicks.Load(), Failed: b.failed.Load()}
}
