package spangoose

import (
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// IsSchemaChangeRejected reports whether err (a goose error, as returned by
// a Provider call) holds Spanner's refusal of a DDL statement because "a
// concurrent schema change operation or read-write transaction is already
// in progress". The refused statement applied nothing, goose left its
// migration unrecorded, and the Locker released the lock, so calling the
// Provider again is safe when the migration's earlier statements, if any,
// can run again (IF NOT EXISTS).
//
// The Cloud Spanner emulator refuses DDL whenever any read-write
// transaction is open, the waiting replicas' lock transactions included;
// production Spanner refuses only concurrent schema changes.
func IsSchemaChangeRejected(err error) bool {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return false
	}
	s := se.GRPCStatus()
	return s.Code() == codes.FailedPrecondition &&
		strings.Contains(s.Message(), "concurrent schema change operation or read-write transaction")
}
