package history

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
)

// WritesDDL returns the CREATE TABLE statement of a table of guarded writes
// named table: one row per write, keyed by the resource, the token and the
// writer (a unique id per write), with its commit timestamp. (Not "At":
// AT is a reserved word in GoogleSQL.)
func WritesDDL(table string) string {
	return fmt.Sprintf("CREATE TABLE %s (Resource STRING(64) NOT NULL, Token INT64 NOT NULL, Writer STRING(64), "+
		"CommittedAt TIMESTAMP OPTIONS (allow_commit_timestamp=true)) PRIMARY KEY (Resource, Token, Writer)", table)
}

// WritesDDLIn is WritesDDL in dialect d: in PostgreSQL, with quoted
// identifiers that keep the same names.
func WritesDDLIn(d ddl.Dialect, table string) string {
	if d != ddl.PostgreSQL {
		return WritesDDL(table)
	}
	return fmt.Sprintf(`CREATE TABLE "%s" ("Resource" varchar(64) NOT NULL, "Token" bigint NOT NULL, "Writer" varchar(64) NOT NULL, `+
		`"CommittedAt" spanner.commit_timestamp, PRIMARY KEY ("Resource", "Token", "Writer"))`, table)
}

// Guard is what a guarded write checks inside its transaction before it
// writes; Lease.Guard is the real one.
type Guard func(ctx context.Context, txn *spanner.ReadWriteTransaction) error

// Client is one client of a workload: it calls spanmutex and records each
// call, with its outcome, in Rec. Its methods are safe for concurrent use,
// but a workload client is meant to do one thing at a time, as a process
// would (renewals are attributed to a lease of their client that held the
// row when they committed, which is ambiguous if one client holds or waits
// for a name twice at once).
type Client struct {
	ID      string          // the client's id in the history
	Spanner *spanner.Client // its own Spanner client, with Rec.RenewalObserver(ID, ...) installed
	Rec     *Recorder
	Writes  string // the table of guarded writes (see WritesDDL)
	// Lease is the lease this client's Locks and Mutexes declare (their
	// lease), recorded with each of its acquisitions: the takeover
	// and liveness checks judge a holder by its own declaration. 0 leaves
	// it to Config.Lease.
	Lease time.Duration

	seq atomic.Int64
}

// Lock calls l.Lock, or l.TryLock if try, and records the acquisition and
// the start of the holder's section under name, l's name.
func (c *Client) Lock(ctx context.Context, name string, l *spanmutex.Lock, try bool) (*spanmutex.Lease, error) {
	note := "Lock"
	if try {
		note = "TryLock"
	}
	call := c.Rec.Begin(Op{Client: c.ID, Kind: Acquire, Name: name, Note: note, Try: try})
	var (
		lease *spanmutex.Lease
		err   error
	)
	if try {
		lease, err = l.TryLock(ctx)
	} else {
		lease, err = l.Lock(ctx)
	}
	if err != nil {
		call.End(Result{Outcome: NoEffect, Err: err, Refusal: classifyRefusal(err, try)})
		return nil, err
	}
	call.End(Result{Outcome: OK, Token: lease.Token(), Takeover: lease.TookOver(), Commit: lease.AcquiredAt(),
		Lease: c.Lease, HandedOff: lease.HandedOff()})
	c.Rec.Event(Op{Client: c.ID, Kind: SectionStart, Name: name, Token: lease.Token()})
	return lease, nil
}

// classifyRefusal says what the error of a Lock (or, if try, TryLock) call
// that returned no lease matched. Lock's contract allows ErrNotObtained and
// ErrOutage; TryLock's adds *HeldError.
func classifyRefusal(err error, try bool) Refusal {
	var held *spanmutex.HeldError
	switch {
	case errors.Is(err, spanmutex.ErrNotObtained):
		return RefusedNotObtained
	case errors.Is(err, spanmutex.ErrOutage):
		return RefusedExhausted
	case try && errors.As(err, &held):
		return RefusedHeld
	}
	return RefusedUnexpected
}

// Unlock records the end of the holder's section, then calls l.Unlock and
// records the release.
func (c *Client) Unlock(ctx context.Context, l *spanmutex.Lock, lease *spanmutex.Lease) error {
	c.Rec.Event(Op{Client: c.ID, Kind: SectionEnd, Name: lease.Name(), Token: lease.Token(), Note: lostNote(lease)})
	call := c.Rec.Begin(Op{Client: c.ID, Kind: Release, Name: lease.Name(), Token: lease.Token()})
	err := l.Unlock(ctx)
	switch {
	case err == nil:
		call.End(Result{Outcome: OK})
	case errors.Is(err, spanmutex.ErrLeaseLost):
		call.End(Result{Outcome: LeaseLost, Err: err})
	default:
		call.End(Result{Outcome: Unknown, Err: err})
	}
	return err
}

func lostNote(l *spanmutex.Lease) string {
	if errors.Is(l.Err(), spanmutex.ErrLeaseLost) {
		return "knew its lease was lost"
	}
	return ""
}

// Run calls m.Run with fn as the section, and records the acquisition
// (when fn is called), the section's start and end, and how Run recorded
// its end: DONE (Complete), FAILED (Fail), or AlreadyDone (SeeDone), under
// name, m's name.
func (c *Client) Run(ctx context.Context, name string, m *spanmutex.Mutex, fn func(ctx context.Context, lease *spanmutex.Lease) error) (spanmutex.Outcome, error) {
	acquire := c.Rec.Begin(Op{Client: c.ID, Kind: Acquire, Name: name, RunOnce: true, Note: "Run"})
	var (
		held   *spanmutex.Lease
		finish *Call
	)
	out, err := m.Run(ctx, func(ctx context.Context, lease *spanmutex.Lease) error {
		held = lease
		acquire.End(Result{Outcome: OK, Token: lease.Token(), Takeover: lease.TookOver(), Commit: lease.AcquiredAt(), Lease: c.Lease})
		c.Rec.Event(Op{Client: c.ID, Kind: SectionStart, Name: name, RunOnce: true, Token: lease.Token()})
		fnErr := fn(ctx, lease)
		c.Rec.Event(Op{Client: c.ID, Kind: SectionEnd, Name: name, RunOnce: true, Token: lease.Token(), Note: lostNote(lease)})
		kind := Complete
		if fnErr != nil {
			kind = Fail
		}
		finish = c.Rec.Begin(Op{Client: c.ID, Kind: kind, Name: name, RunOnce: true, Token: lease.Token()})
		return fnErr
	})
	if held == nil {
		switch {
		case out == spanmutex.AlreadyDone:
			acquire.End(Result{Outcome: OK, Kind: SeeDone})
		default:
			acquire.End(Result{Outcome: NoEffect, Err: err, Note: out.String()})
		}
		return out, err
	}
	var secErr *spanmutex.SectionError
	switch {
	case err == nil:
		finish.End(Result{Outcome: OK})
	case errors.As(err, &secErr) && err == error(secErr):
		// Run returns the section's error alone only when FAILED was
		// recorded.
		finish.End(Result{Outcome: OK, Err: err})
	case errors.Is(err, spanmutex.ErrLeaseLost):
		finish.End(Result{Outcome: LeaseLost, Err: err})
	default:
		finish.End(Result{Outcome: Unknown, Err: err})
	}
	return out, err
}

// Write makes a guarded write of lease's token to resource: one read-write
// transaction that calls guard and, if it passes, inserts a row keyed by a
// fresh writer id into the writes table, with its commit timestamp.
// Pass lease.Guard as guard; anything else is for showing what happens
// without it.
func (c *Client) Write(ctx context.Context, lease *spanmutex.Lease, resource string, guard Guard) error {
	id := fmt.Sprintf("%s-%d", c.ID, c.seq.Add(1))
	call := c.Rec.Begin(Op{Client: c.ID, Kind: Write, Name: lease.Name(), Resource: resource, WriteID: id, Token: lease.Token()})
	ts, err := c.Spanner.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		if err := guard(ctx, txn); err != nil {
			return err
		}
		return txn.BufferWrite([]*spanner.Mutation{spanner.Insert(c.Writes,
			[]string{"Resource", "Token", "Writer", "CommittedAt"},
			[]any{resource, lease.Token(), id, spanner.CommitTimestamp})})
	})
	switch {
	case err == nil:
		call.End(Result{Outcome: OK, Commit: ts})
	case errors.Is(err, spanmutex.ErrLeaseLost):
		// Guard refused before anything was written.
		call.End(Result{Outcome: LeaseLost, Err: err})
	default:
		call.End(Result{Outcome: Unknown, Err: err})
	}
	return err
}

// ReadBack reads, in one strong snapshot each, the writes table and the
// mutex rows (in mutexTable, "" for the default) of the run-once sections
// and the Locks in ops. Call it after every client has stopped.
func ReadBack(ctx context.Context, client *spanner.Client, writesTable, mutexTable string, ops []Op) (*Readback, error) {
	rb := &Readback{Writes: map[string]WrittenRow{}, Rows: map[string]FinalRow{}, Locks: map[string]FinalRow{}}
	// A key read of every row: the same in both dialects.
	err := client.Single().Read(ctx, writesTable, spanner.AllKeys(), []string{"Writer", "Resource", "Token", "CommittedAt"}).Do(func(r *spanner.Row) error {
		var id spanner.NullString
		var w WrittenRow
		if err := r.Columns(&id, &w.Resource, &w.Token, &w.Commit); err != nil {
			return err
		}
		rb.Writes[id.StringVal] = w
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("history: read %s: %w", writesTable, err)
	}
	runOnce, locks := map[string]bool{}, map[string]bool{}
	for _, o := range ops {
		switch {
		case o.RunOnce:
			runOnce[o.Name] = true
		case o.Kind == Acquire:
			locks[o.Name] = true
		}
	}
	if mutexTable == "" {
		mutexTable = ddl.DefaultMutexTable
	}
	rows, err := spanmutex.Inspect(ctx, client, "", spanmutex.WithTable(mutexTable))
	if err != nil {
		return nil, fmt.Errorf("history: read the mutex rows: %w", err)
	}
	for _, s := range rows {
		fr := FinalRow{State: string(s.State), Token: s.Token, Owner: s.Owner}
		switch {
		case runOnce[s.Name]:
			rb.Rows[s.Name] = fr
		case locks[s.Name]:
			rb.Locks[s.Name] = fr
		}
	}
	return rb, nil
}
