package sheets

import (
	"encoding/json"
	"fmt"
	"time"
)

// The JSON bodies of the HTTP API (see Server).

// CreateRequest is the body of POST /sheets.
type CreateRequest struct {
	// ID is the sheet's id: 1 to MaxSheetIDLength letters, digits, '-' or
	// '_', so that it can stand in a URL path as it is.
	ID string `json:"id"`
}

// UpdateRequest is the body of POST /sheets/{id}/updates: one click of the
// user's "send back" link.
type UpdateRequest struct {
	// Payload is what the click sends back, any JSON value but null; the
	// back end applies it to the sheet as it is.
	Payload json.RawMessage `json:"payload"`
}

// Accepted is the answer (202 Accepted) to a create or an update: the
// request is in the queue.
type Accepted struct {
	Sheet   string `json:"sheet"`
	Request string `json:"request"` // the queue request's id
	Kind    string `json:"kind"`    // "create" or "update"
	Status  string `json:"status"`  // "new"
}

// SheetStatus is the answer to GET /sheets/{id}: the sheet's requests, by
// status, and the sheet as stored.
type SheetStatus struct {
	Sheet    string          `json:"sheet"`
	Requests []RequestStatus `json:"requests"` // oldest first
	// Pending counts requests new or in-progress; Complete and Error the
	// finished ones.
	Pending  int `json:"pending"`
	Complete int `json:"complete"`
	Error    int `json:"error"`
	// Stored is the sheet in the store, nil until it is created.
	Stored *StoredSheet `json:"stored,omitempty"`
}

// RequestStatus is one queue request of a sheet.
type RequestStatus struct {
	ID         string     `json:"id"`
	Kind       string     `json:"kind"`
	Status     string     `json:"status"`
	Token      int64      `json:"token,omitempty"` // the lease token of its last claim
	Attempts   int64      `json:"attempts"`
	LastError  string     `json:"lastError,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
}

// StoredSheet is a sheet as the store holds it.
type StoredSheet struct {
	CreatedToken int64 `json:"createdToken"`
	LastToken    int64 `json:"lastToken"`
	Updates      int   `json:"updates"` // update writes applied
	Clicks       int   `json:"clicks"`  // payloads applied by them
}

// ErrorBody is the body of every 4xx and 5xx answer.
type ErrorBody struct {
	Error string `json:"error"`
}

// MaxSheetIDLength is the longest sheet id, in characters.
const MaxSheetIDLength = 100

// ValidateSheetID returns nil if id can name a sheet, or an error saying
// what is wrong with it.
func ValidateSheetID(id string) error {
	if id == "" {
		return fmt.Errorf("empty sheet id: give \"id\", 1 to %d letters, digits, '-' or '_'", MaxSheetIDLength)
	}
	if len(id) > MaxSheetIDLength {
		return fmt.Errorf("sheet id is %d characters long; at most %d are allowed", len(id), MaxSheetIDLength)
	}
	for i, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("sheet id %q has %q at byte %d; use letters, digits, '-' or '_'", id, c, i)
		}
	}
	return nil
}
