package queue

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test for them with errors.Is.
var (
	// ErrInvalidRequest: a request given to Enqueue is malformed (unknown
	// kind, empty or overlong resource, oversized payload, bad id). Nothing
	// was written. Returned as *InvalidRequestError.
	ErrInvalidRequest = errors.New("queue: invalid request")

	// ErrDuplicateCreate: a create was enqueued for a resource that already
	// has one (Spanner's unique index on creates refused it). Nothing was
	// written. Returned as *DuplicateCreateError.
	ErrDuplicateCreate = errors.New("queue: duplicate create")

	// ErrNoCreate: an update was enqueued for a resource that has no create,
	// neither committed nor in the same batch. Nothing was written.
	ErrNoCreate = errors.New("queue: update of a resource that was never created")

	// ErrDuplicateID: a request with a caller-chosen id was enqueued, but a
	// request with that id already exists (often the first try of a
	// retried Enqueue that committed). Nothing was written.
	ErrDuplicateID = errors.New("queue: request id already exists")

	// ErrNotFound: no request has the id asked for.
	ErrNotFound = errors.New("queue: request not found")

	// ErrInvalidConfig is wrapped by every error New and NewWorker return for
	// bad options.
	ErrInvalidConfig = errors.New("queue: invalid configuration")
)

// InvalidRequestError says which request was wrong and why. It matches
// ErrInvalidRequest.
type InvalidRequestError struct {
	Index  int    // the request's position in the Enqueue call
	Reason string // what was wrong and what to do
}

func (e *InvalidRequestError) Error() string {
	return fmt.Sprintf("queue: invalid request #%d: %s; nothing was enqueued", e.Index, e.Reason)
}

// Is reports whether target is ErrInvalidRequest.
func (e *InvalidRequestError) Is(target error) bool { return target == ErrInvalidRequest }

// DuplicateCreateError names the resource that already has a create. It
// matches ErrDuplicateCreate.
type DuplicateCreateError struct {
	Resource string
	Err      error // Spanner's AlreadyExists, when the database refused it
}

func (e *DuplicateCreateError) Error() string {
	return fmt.Sprintf("queue: resource %q already has a create request; enqueue an update instead; nothing was enqueued", e.Resource)
}

// Is reports whether target is ErrDuplicateCreate.
func (e *DuplicateCreateError) Is(target error) bool { return target == ErrDuplicateCreate }

// Unwrap returns Spanner's error, if any.
func (e *DuplicateCreateError) Unwrap() error { return e.Err }
