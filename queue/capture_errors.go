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
	// capture cannot decode (a PostgreSQL-dialect database, a
	// MUTABLE_KEY_RANGE stream, a record without its identifying fields).
	// Run stops.
	ErrUnsupportedRecord = errors.New("queue: capture: unsupported change stream record")

	// ErrDialectUnsupported: the database is PostgreSQL-dialect, whose
	// change streams the capture does not read. NewCapture (when the
	// dialect was given with WithDialect) or Run (before reading anything)
	// returns it as *DialectError.
	ErrDialectUnsupported = errors.New("queue: capture: PostgreSQL-dialect databases are not supported")

	// errPartitionLost: another capture instance owns the partition now
	// (this one paused for longer than the lease); this instance stops
	// reading it and writes nothing more for it.
	errPartitionLost = errors.New("queue: capture: partition taken over by another instance")
)

// DialectError says that the capture cannot read the change streams of
// Database, a PostgreSQL-dialect database: it reads a stream with the
// GoogleSQL READ_<stream> function and decodes its ChangeRecord STRUCTs,
// while PostgreSQL streams are read with spanner.read_json_<stream> and
// return JSONB records, which it does not decode. It matches
// ErrDialectUnsupported. The queue itself, its workers and EnqueueTx work
// on PostgreSQL: enqueue in the transaction that makes the change instead.
type DialectError struct {
	Database string
	Stream   string
}

func (e *DialectError) Error() string {
	return fmt.Sprintf("queue: capture of stream %s: database %s is PostgreSQL-dialect; the capture reads only GoogleSQL change streams (PostgreSQL returns JSONB records from spanner.read_json_%s, which it does not decode): enqueue with EnqueueTx in the writing transaction instead",
		e.Stream, e.Database, e.Stream)
}

// Is reports whether target is ErrDialectUnsupported.
func (e *DialectError) Is(target error) bool { return target == ErrDialectUnsupported }

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
