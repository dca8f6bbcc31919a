package sheets

import "errors"

// Errors of the store, as a spreadsheet API would return them. Test for
// them with errors.Is.
var (
	// ErrSheetExists: a create of a sheet that exists or is being created.
	// The write is refused and recorded as a DoubleCreate violation.
	ErrSheetExists = errors.New("sheets: the sheet already exists")

	// ErrNoSheet: an update of a sheet that has not been created. The write
	// is refused and recorded as an UpdateBeforeCreate violation.
	ErrNoSheet = errors.New("sheets: no such sheet")

	// ErrInvalidWrite: a write with an empty sheet id or a token below 1.
	// Nothing is recorded.
	ErrInvalidWrite = errors.New("sheets: invalid write")

	// ErrInvalidConfig is wrapped by the errors of NewStore, NewServer and
	// NewBackend for bad arguments.
	ErrInvalidConfig = errors.New("sheets: invalid configuration")
)
