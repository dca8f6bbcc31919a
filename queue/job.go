package queue

import (
	"context"

	"github.com/spanmutex/spanmutex"
)

// Handler does the work of one job: creates the resource (KindCreate) or
// applies its outstanding updates (KindUpdate). It returns nil when the work
// is done, and an error to end every request of the job in error with the
// error's text (handler errors are not retried). A panic counts as an error.
//
// ctx is cancelled when the worker loses its lease on the resource (another
// worker may then take the requests over), or when the worker shuts down and
// the handler overruns the grace period. The handler must honour it: the
// worker waits for the handler to return before it lets go of the resource,
// so that no two handlers ever run on one resource. Writes the handler makes
// elsewhere should carry the job's Token (see spanmutex.Fence), or be made
// in a Spanner transaction that calls Job.Lease.Guard.
type Handler func(ctx context.Context, job *Job) error

// Job is the work a worker hands to its Handler: one resource's create, or
// all of its outstanding updates, claimed together under the resource's
// lease.
type Job struct {
	// Resource is the key the requests are about.
	Resource string
	// Kind is KindCreate when Requests holds the resource's one create, and
	// KindUpdate when it holds every outstanding update of the resource,
	// oldest first; its create has completed.
	Kind Kind
	// Requests are the claimed requests, in-progress under this job's claim.
	Requests []Request
	// Lease is the worker's lease on the resource; the handler's context is
	// cancelled if it is lost.
	Lease *spanmutex.Lease
}

// Token returns the fencing token of the job's lease on the resource: higher
// than the token of every job of the resource handled under an earlier
// lease, and equal for the jobs of one tenure (a create and then its
// updates, handled under one lease). A fence that accepts a token only if it
// is at least the highest seen so rejects the writes of every earlier lease.
func (j *Job) Token() int64 { return j.Lease.Token() }
