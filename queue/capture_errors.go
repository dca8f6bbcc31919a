package queue

import (
	"errors"
	"fmt"
	"time"
)

// Errors of the change-stream capture. Test for them with errors.Is and
// errors.As.
var (
	// ErrMapper: the Mapper failed on a change, or returned a request that
	// the queue cannot take. Run stops; the partition's checkpoint stays
	// before the change, so that a corrected Mapper resumes there. Returned
	// as *MapperError.
	ErrMapper = errors.New("queue: capture: mapper failed")

	// ErrUnsupportedRecord: the change stream returned a record this
	// capture cannot decode (a MUTABLE_KEY_RANGE stream, a record without
	// its identifying fields).
	// Run stops.
	ErrUnsupportedRecord = errors.New("queue: capture: unsupported change stream record")

	// errPartitionLost: another capture instance owns the partition now
	// (this one paused for longer than the lease); this instance stops
	// reading it and writes nothing more for it.
	errPartitionLost = errors.New("queue: capture: partition taken over by another instance")
)

// MapperError says which change the Mapper failed on. It matches ErrMapper
// and unwraps to the Mapper's error (or to the *InvalidRequestError of the
// request it returned).
type MapperError struct {
	Table               string
	Mod                 ModType
	Keys                string
	CommitTimestamp     time.Time
	ServerTransactionID string
	RecordSequence      string
	ModIndex            int
	Err                 error
}

// Error says which change failed, and that the capture stopped before it.
func (e *MapperError) Error() string {
	return fmt.Sprintf("queue: capture: mapper failed on %s of %s %s (transaction %s, record %s, mod %d, committed %s): %v; the capture stopped before this change",
		e.Mod, e.Table, e.Keys, e.ServerTransactionID, e.RecordSequence, e.ModIndex, e.CommitTimestamp.Format(time.RFC3339Nano), e.Err)
}

// Is reports whether target is ErrMapper.
func (e *MapperError) Is(target error) bool { return target == ErrMapper }

// Unwrap returns the Mapper's error.
func (e *MapperError) Unwrap() error { return e.Err }

func newMapperError(ch Change, err error) *MapperError {
	return &MapperError{Table: ch.Table, Mod: ch.Mod, Keys: ch.Keys, CommitTimestamp: ch.CommitTimestamp,
		ServerTransactionID: ch.ServerTransactionID, RecordSequence: ch.RecordSequence, ModIndex: ch.ModIndex, Err: err}
}
