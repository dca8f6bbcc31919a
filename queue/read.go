package queue

import (
	"context"
	"fmt"
	"strings"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
)

// rowReader is what both a read-write transaction and a single-use read
// offer: reads by key, of the table or of an index.
type rowReader interface {
	Read(ctx context.Context, table string, keys spanner.KeySet, columns []string) *spanner.RowIterator
	ReadUsingIndex(ctx context.Context, table, index string, keys spanner.KeySet, columns []string) *spanner.RowIterator
}

// keysOf returns the key set of the single-column keys values.
func keysOf(values []string) spanner.KeySet {
	keys := make([]spanner.KeySet, len(values))
	for i, v := range values {
		keys[i] = spanner.Key{v}
	}
	return spanner.KeySets(keys...)
}

// requestColumns are the columns decodeRequest reads, in its order.
var requestColumns = []string{"RequestID", "Status", "Kind", "Resource", "Payload", "ProcessID", "Token",
	"Attempts", "LastError", "CreatedAt", "ClaimedAt", "FinishedAt"}

// requestSelectList is requestColumns for a SELECT (quoted: see statement).
var requestSelectList = "`" + strings.Join(requestColumns, "`, `") + "`"

// statement is q.dialect.Statement, its error prefixed with the package.
func (q *Queue) statement(ctx context.Context, sql string, params map[string]any) (spanner.Statement, error) {
	stmt, err := q.dialect.Statement(ctx, sql, params)
	if err != nil {
		return stmt, fmt.Errorf("queue: %w", err)
	}
	return stmt, nil
}

// decodeRequest reads a row that starts with requestColumns.
func decodeRequest(row *spanner.Row) (Request, error) {
	var (
		r                     Request
		status, kind          string
		processID, lastError  spanner.NullString
		token                 spanner.NullInt64
		claimedAt, finishedAt spanner.NullTime
	)
	// By position, so that a query may select more columns after these.
	for i, ptr := range []any{&r.ID, &status, &kind, &r.Resource, &r.Payload, &processID, &token,
		&r.Attempts, &lastError, &r.CreatedAt, &claimedAt, &finishedAt} {
		if err := row.Column(i, ptr); err != nil {
			return Request{}, fmt.Errorf("queue: decode a request: %w", err)
		}
	}
	r.Status, r.Kind = Status(status), Kind(kind)
	r.ProcessID, r.LastError, r.Token = processID.StringVal, lastError.StringVal, token.Int64
	r.ClaimedAt, r.FinishedAt = claimedAt.Time, finishedAt.Time
	return r, nil
}

// Get returns the request with the given id, by a strong read, or an error
// matching ErrNotFound.
func (q *Queue) Get(ctx context.Context, id string) (Request, error) {
	if ctx == nil {
		return Request{}, errNilContext
	}
	row, err := q.client.Single().ReadRow(ctx, q.cfg.table, spanner.Key{id}, requestColumns)
	if spanner.ErrCode(err) == codes.NotFound {
		return Request{}, fmt.Errorf("%w: %q in table %s", ErrNotFound, id, q.cfg.table)
	}
	if err != nil {
		return Request{}, fmt.Errorf("queue: read request %q: %w", id, err)
	}
	return decodeRequest(row)
}

// List returns every request of resource, oldest first, by a strong read.
func (q *Queue) List(ctx context.Context, resource string) ([]Request, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	stmt, err := q.statement(ctx, fmt.Sprintf("SELECT %s FROM `%s`@{FORCE_INDEX=`%sByResource`} WHERE `Resource` = @resource ORDER BY `CreatedAt`, `RequestID`",
		requestSelectList, q.cfg.table, q.cfg.table), map[string]any{"resource": resource})
	if err != nil {
		return nil, err
	}
	var out []Request
	err = q.client.Single().Query(ctx, stmt).Do(func(row *spanner.Row) error {
		r, err := decodeRequest(row)
		out = append(out, r)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("queue: list the requests of %q: %w", resource, err)
	}
	return out, nil
}

// Counts returns how many requests are in each status, by a strong read that
// scans the whole table: meant for tests, demos and dashboards, not for a
// hot path.
func (q *Queue) Counts(ctx context.Context) (map[Status]int64, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	stmt, err := q.statement(ctx, fmt.Sprintf("SELECT `Status`, COUNT(*) FROM `%s` GROUP BY `Status`", q.cfg.table), nil)
	if err != nil {
		return nil, err
	}
	out := map[Status]int64{}
	err = q.client.Single().Query(ctx, stmt).Do(func(row *spanner.Row) error {
		var s string
		var n int64
		if err := row.Columns(&s, &n); err != nil {
			return err
		}
		out[Status(s)] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("queue: count requests by status: %w", err)
	}
	return out, nil
}
