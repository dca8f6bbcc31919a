package spanmutex

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex/internal/names"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

// staleTokenError says which resource rejected which token. It matches
// ErrStaleToken.
type staleTokenError struct {
	Resource string
	Token    int64 // the token the operation carried
	Highest  int64 // the highest token the resource has accepted
}

func (e *staleTokenError) Error() string {
	return fmt.Sprintf("spanmutex: resource %q rejected fencing token %d: it already accepted token %d from a newer holder", e.Resource, e.Token, e.Highest)
}

// Is reports whether target is ErrStaleToken.
func (e *staleTokenError) Is(target error) bool { return target == ErrStaleToken }

// Fence guards a resource outside the lock, such as a file in object storage
// or a spreadsheet behind an API, with fencing tokens: it records in Spanner,
// per resource, the highest token it has accepted, and rejects an operation
// that carries a lower one. A holder that paused past its lease and comes
// back with an old token is thus refused, even though it still believes it
// holds the lock.
//
// The resource's side calls Admit before applying each operation (or AdmitTx
// inside the transaction that applies it, when the resource lives in the same
// Spanner database). Equal tokens are admitted: one holder may make many
// operations. Tokens of different lock names are not comparable, so a
// resource is bound to the first lock name it sees and refuses others.
// A Fence is safe for concurrent use.
type Fence struct {
	client *spanner.Client
	table  string
	// dialect is the dialect WithDialect declared, which Admit checks
	// once; nil if none was.
	dialect *sqldialect.Of
}

// NewFence returns a Fence stored in client's database, in the fence table
// (WithTable; default "Fences"). It takes WithTable and WithDialect
// (which it needs not: a Fence issues no SQL, only key reads and mutations,
// the same in both dialects; but a declared dialect is checked once, by the
// first Admit, as everywhere: a wrong one is a wrong configuration). Every
// error wraps ErrInvalidConfig.
func NewFence(client *spanner.Client, opts ...Option) (*Fence, error) {
	if client == nil {
		return nil, errNilClient("NewFence")
	}
	cfg, err := newConfig(append([]Option{WithTable(defaultFenceTable)}, opts...)) // options.go
	if err != nil {
		return nil, err
	}
	f := &Fence{client: client, table: cfg.table}
	if cfg.dialectSet {
		f.dialect = sqldialect.Declared(client, cfg.dialect)
	}
	return f, nil
}

// Admit records token as accepted for resource and returns nil, or returns an
// error matching ErrStaleToken (and records nothing) if the resource already accepted a
// higher token of lockName. Apply the operation only after Admit returned
// nil; and only if the operation itself cannot be delayed past a later
// Admit, which is what AdmitTx is for.
//
// A resource must be 1 to 1024 characters of valid UTF-8 with no control
// characters (no NUL, no newline), lockName a valid name (names.Name) and
// token at least 1, as every Lease's is; otherwise Admit returns an error
// wrapping ErrInvalidConfig and records nothing. A Fence not made by
// NewFence (its zero value) returns such an error too.
func (f *Fence) Admit(ctx context.Context, resource, lockName string, token int64) error {
	if ctx == nil {
		return errNilContext
	}
	if err := f.validate(resource, lockName, token); err != nil {
		return err
	}
	if f.dialect != nil {
		if err := checkDialect(ctx, f.dialect); err != nil { // dialect.go
			return err
		}
	}
	_, err := f.client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return f.AdmitTx(ctx, txn, resource, lockName, token)
	})
	return err
}

// validate checks the Fence and the arguments of an Admit.
func (f *Fence) validate(resource, lockName string, token int64) error {
	if f == nil || f.client == nil {
		return fmt.Errorf("%w: Fence used without NewFence", ErrInvalidConfig)
	}
	if err := names.Text("fence resource", resource, maxResourceLength); err != nil { // name.go
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if err := validateName(lockName); err != nil {
		return err
	}
	if token < 1 {
		return fmt.Errorf("%w: fencing token %d for resource %q: tokens start at 1; pass Lease.Token()", ErrInvalidConfig, token, resource)
	}
	return nil
}

// maxResourceLength is the length of the fence table's Resource column.
const maxResourceLength = 1024

// AdmitTx is Admit inside the caller's read-write transaction, so that the
// operation's own writes commit only together with the token check. It
// validates its arguments as Admit does; it does not check a declared
// dialect (Admit does), as a Fence issues no SQL.
func (f *Fence) AdmitTx(ctx context.Context, txn *spanner.ReadWriteTransaction, resource, lockName string, token int64) error {
	if err := f.validate(resource, lockName, token); err != nil {
		return err
	}
	if txn == nil {
		return fmt.Errorf("%w: AdmitTx: nil transaction", ErrInvalidConfig)
	}
	r, err := txn.ReadRow(ctx, f.table, spanner.Key{resource}, []string{"LockName", "Token"})
	switch {
	case errors.Is(err, spanner.ErrRowNotFound):
		// Not seen before: accept.
	case err != nil:
		return fmt.Errorf("spanmutex: fence %s: %w", f.table, err)
	default:
		var name string
		var highest int64
		if err := r.Columns(&name, &highest); err != nil {
			return fmt.Errorf("spanmutex: fence %s: %w", f.table, err)
		}
		if name != lockName {
			return fmt.Errorf("%w: resource %q is fenced by lock %q, not %q: tokens of different locks are not comparable", ErrInvalidConfig, resource, name, lockName)
		}
		if token < highest {
			return &staleTokenError{Resource: resource, Token: token, Highest: highest}
		}
		if token == highest {
			return nil
		}
	}
	return txn.BufferWrite([]*spanner.Mutation{spanner.InsertOrUpdate(f.table,
		[]string{"Resource", "LockName", "Token", "UpdatedAt"},
		[]any{resource, lockName, token, spanner.CommitTimestamp})})
}
