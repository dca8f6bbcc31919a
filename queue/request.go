package queue

import (
	"fmt"
	"time"
	"unicode"

	"github.com/spanmutex/spanmutex/internal/names"
)

// Kind is what a request asks for.
type Kind string

// The kinds of request.
const (
	// KindCreate creates the resource. At most one per resource.
	KindCreate Kind = "create"
	// KindUpdate updates it, once its create is complete. Outstanding
	// updates of one resource are claimed together and handled as one.
	KindUpdate Kind = "update"
)

// Status is where a request is in its life: new → in-progress → complete or
// error. A claim abandoned (its worker died or lost its lease) is claimed
// again by the next worker that holds the resource, from in-progress.
type Status string

// The statuses of a request.
const (
	StatusNew        Status = "new"
	StatusInProgress Status = "in-progress"
	StatusComplete   Status = "complete"
	StatusError      Status = "error"
)

// Finished reports whether s is final (complete or error).
func (s Status) Finished() bool { return s == StatusComplete || s == StatusError }

// Limits on a request's fields.
const (
	// MaxResourceLength is the longest resource key, in characters.
	MaxResourceLength = 200
	// MaxIDLength is the longest request id, in bytes.
	MaxIDLength = 64
	// DefaultMaxPayload is the largest payload Enqueue accepts unless
	// WithMaxPayload says otherwise: 1 MiB.
	DefaultMaxPayload = 1 << 20
	// maxPayloadLimit is Spanner's limit on one cell, 10 MiB.
	maxPayloadLimit = 10 << 20
)

// Request is one request in the queue. Enqueue reads ID (optional), Kind,
// Resource and Payload; the other fields are filled in when a request is
// read back (Get, List, and the requests a handler is given).
type Request struct {
	// ID identifies the request; Enqueue sets a random UUID when empty. A
	// caller that derives it from its own data makes a retried Enqueue of
	// the same request fail with ErrDuplicateID instead of adding a copy.
	ID       string
	Kind     Kind
	Resource string // the resource's key, e.g. the spreadsheet id
	Payload  []byte // opaque to the queue

	Status    Status
	ProcessID string // the claim that holds it (in-progress) or held it last
	Token     int64  // the fencing token of that claim's lease on the resource
	Attempts  int64  // how many times it was claimed
	LastError string // why it ended in error, or why a claim was abandoned

	// Spanner commit timestamps.
	CreatedAt  time.Time
	ClaimedAt  time.Time // zero until claimed
	FinishedAt time.Time // zero until finished
}

// validate checks what Enqueue reads, with the limit on payloads.
func (r Request) validate(maxPayload int) string {
	switch r.Kind {
	case KindCreate, KindUpdate:
	default:
		return fmt.Sprintf("unknown kind %q: use %q or %q", r.Kind, KindCreate, KindUpdate)
	}
	if r.Resource == "" {
		return "empty resource: name the resource (e.g. the spreadsheet id) the request is about"
	}
	if err := names.Text("resource", r.Resource, MaxResourceLength); err != nil {
		return err.Error()
	}
	if len(r.Payload) > maxPayload {
		return fmt.Sprintf("payload is %d bytes; at most %d are allowed (WithMaxPayload); store large data elsewhere and enqueue a reference", len(r.Payload), maxPayload)
	}
	if r.ID != "" {
		if len(r.ID) > MaxIDLength {
			return fmt.Sprintf("id is %d bytes; at most %d are allowed", len(r.ID), MaxIDLength)
		}
		for i, c := range r.ID {
			if c > unicode.MaxASCII || !unicode.IsPrint(c) || c == ' ' {
				return fmt.Sprintf("id %q has a character that is not printable ASCII at byte %d", r.ID, i)
			}
		}
	}
	return ""
}
