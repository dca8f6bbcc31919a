package migrations

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is wrapped by every error New returns for bad input.
var ErrInvalidConfig = errors.New("migrations: invalid configuration")

// ErrDirty is matched by the *DirtyError Up returns when the database's
// version is dirty: a migration failed half-way earlier (a DDL file whose
// first statements applied and a later one failed, or a migrator that died
// mid-migration). A person must look, fix the schema, and force the version
// (golang-migrate's `migrate force V`); Up never guesses.
var ErrDirty = errors.New("migrations: database version is dirty")

// DirtyError says at which version the database is dirty.
type DirtyError struct {
	Version int
}

func (e *DirtyError) Error() string {
	return fmt.Sprintf("migrations: database version %d is dirty: a migration failed half-way; fix the schema by hand, then force the version (migrate force)", e.Version)
}

// Is reports whether target is ErrDirty.
func (e *DirtyError) Is(target error) bool { return target == ErrDirty }
