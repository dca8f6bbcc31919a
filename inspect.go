package spanmutex

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"
)

// Record is one row of the mutex table, as Inspect reports it.
type Record struct {
	Name       string
	State      State
	Owner      string
	Token      int64
	Attempts   int64
	LastError  string
	StartedAt  time.Time // zero if never started
	RenewedAt  time.Time // zero if never started
	FinishedAt time.Time // zero unless DONE or FAILED
	UpdatedAt  time.Time
	// Version is the version that last started the row (see WithVersion);
	// "" if none, or if the table has no Version column.
	Version string
	// Age is how long ago, by Spanner's clock at the read, the row last
	// changed (UpdatedAt).
	Age time.Duration
}

// Inspect reads the rows of the mutex table (WithTable; default
// "Mutexes") from one strong snapshot, ordered by name: all of them if
// name is empty, else that one (none if it does not exist). It is read-only
// and takes no locks. It takes WithTable and WithDialect.
func Inspect(ctx context.Context, client *spanner.Client, name string, opts ...Option) ([]Record, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	if client == nil {
		return nil, fmt.Errorf("%w: nil *spanner.Client", ErrInvalidConfig)
	}
	began := time.Now()
	cfg, err := newConfig(opts) // options.go
	if err != nil {
		return nil, err
	}
	table := cfg.table
	st := cfg.newStore(client) // the lease, which Inspect does not take, is defaultLease
	st.readOnly = true
	if err := st.checkSchema(ctx); err != nil {
		return nil, st.unreached(ctx, err, began)
	}
	version := "" // a table created before the Version column
	if st.hasVersion.Load() {
		version = ", `Version`"
	}
	sql := fmt.Sprintf("SELECT CURRENT_TIMESTAMP(), `Name`, `State`, `Owner`, `Token`, `Attempts`, `LastError`, `StartedAt`, `RenewedAt`, `FinishedAt`, `UpdatedAt`%s FROM `%s`", version, table)
	params := map[string]any{}
	if name != "" {
		sql += " WHERE `Name` = @name"
		params["name"] = name
	}
	sql += " ORDER BY `Name`"
	stmt, err := st.dialect.Statement(ctx, sql, params)
	if err != nil {
		return nil, st.unreached(ctx, err, began)
	}
	var out []Record
	err = client.Single().Query(ctx, stmt).Do(func(r *spanner.Row) error {
		var (
			now                                 time.Time
			s                                   Record
			state, owner, lastErr, ver          spanner.NullString
			started, renewed, finished, updated spanner.NullTime
		)
		dest := []any{&now, &s.Name, &state, &owner, &s.Token, &s.Attempts, &lastErr, &started, &renewed, &finished, &updated}
		if version != "" {
			dest = append(dest, &ver)
		}
		if err := r.Columns(dest...); err != nil {
			return err
		}
		s.State, s.Owner, s.LastError, s.Version = State(state.StringVal), owner.StringVal, lastErr.StringVal, ver.StringVal
		s.StartedAt, s.RenewedAt, s.FinishedAt, s.UpdatedAt = nullTime(started), nullTime(renewed), nullTime(finished), nullTime(updated)
		s.Age = now.Sub(s.UpdatedAt)
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, st.unreached(ctx, st.explainOther(err), began)
	}
	return out, nil
}
