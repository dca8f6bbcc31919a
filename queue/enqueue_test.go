package queue

import (
	"context"
	"errors"
	"testing"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/ddl"
)

func TestEnqueueRejectsADuplicateCreateAndWritesNothing(t *testing.T) {
	eachDialect(t, testEnqueueRejectsADuplicateCreateAndWritesNothing)
}

func testEnqueueRejectsADuplicateCreateAndWritesNothing(t *testing.T, d ddl.Dialect) {
	c := newClient(t, freshDatabaseIn(t, d))
	q, err := New(c)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = q.Enqueue(ctx, Request{Kind: KindCreate, Resource: "sheet-1"})
	require.NoError(t, err)

	_, err = q.Enqueue(ctx, Request{Kind: KindUpdate, Resource: "sheet-1"}, Request{Kind: KindCreate, Resource: "sheet-1"})
	var dup *DuplicateCreateError
	require.ErrorAs(t, err, &dup)
	require.Equal(t, "sheet-1", dup.Resource)
	got, err := q.List(ctx, "sheet-1")
	require.NoError(t, err)
	require.Len(t, got, 1, "the batch with the duplicate create wrote nothing, its update included")
	require.Equal(t, KindCreate, got[0].Kind)
	require.Equal(t, StatusNew, got[0].Status)
}

func TestEnqueueRejectsAnUpdateWithoutACreate(t *testing.T) {
	eachDialect(t, testEnqueueRejectsAnUpdateWithoutACreate)
}

func testEnqueueRejectsAnUpdateWithoutACreate(t *testing.T, d ddl.Dialect) {
	c := newClient(t, freshDatabaseIn(t, d))
	q, err := New(c)
	require.NoError(t, err)
	_, err = q.Enqueue(context.Background(), Request{Kind: KindUpdate, Resource: "never-created"})
	require.ErrorIs(t, err, ErrNoCreate)
	n, err := q.Counts(context.Background())
	require.NoError(t, err)
	require.Empty(t, n)
}

func TestEnqueueRejectsInvalidRequests(t *testing.T) {
	c := newClient(t, freshDatabase(t))
	q, err := New(c, WithMaxPayload(10))
	require.NoError(t, err)
	for name, r := range map[string]Request{
		"unknown kind":     {Kind: "delete", Resource: "s"},
		"empty resource":   {Kind: KindCreate},
		"control char":     {Kind: KindCreate, Resource: "a\nb"},
		"oversize payload": {Kind: KindCreate, Resource: "s", Payload: make([]byte, 11)},
		"bad id":           {ID: "has space", Kind: KindCreate, Resource: "s"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := q.Enqueue(context.Background(), r)
			var inv *InvalidRequestError
			require.ErrorAs(t, err, &inv)
			require.ErrorIs(t, err, ErrInvalidRequest)
		})
	}
	n, err := q.Counts(context.Background())
	require.NoError(t, err)
	require.Empty(t, n, "nothing was written")
}

func TestEnqueueTxRolledBackLeavesNoRequest(t *testing.T) {
	eachDialect(t, testEnqueueTxRolledBackLeavesNoRequest)
}

func testEnqueueTxRolledBackLeavesNoRequest(t *testing.T, d ddl.Dialect) {
	c := newClient(t, freshDatabaseIn(t, d))
	q, err := New(c)
	require.NoError(t, err)
	ctx := context.Background()
	callerFailed := errors.New("the caller's own change failed")
	var id string
	_, err = c.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		ids, err := q.EnqueueTx(ctx, txn, Request{Kind: KindCreate, Resource: "rolled-back"})
		if err != nil {
			return err
		}
		id = ids[0]
		return callerFailed
	})
	require.ErrorIs(t, err, callerFailed)
	_, err = q.Get(ctx, id)
	require.ErrorIs(t, err, ErrNotFound, "a rolled-back transaction leaves no phantom request")

	_, err = c.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		ids, err := q.EnqueueTx(ctx, txn, Request{Kind: KindCreate, Resource: "committed"})
		if err == nil {
			id = ids[0]
		}
		return err
	})
	require.NoError(t, err)
	r, err := q.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, StatusNew, r.Status)
	require.False(t, r.CreatedAt.IsZero())
}

func TestRenamedTableWithRetentionPolicy(t *testing.T) {
	eachDialect(t, testRenamedTableWithRetentionPolicy)
}

func testRenamedTableWithRetentionPolicy(t *testing.T, d ddl.Dialect) {
	needEmulator(t)
	stmts, err := d.RequestsStatements("SheetJobs")
	require.NoError(t, err)
	retention, err := d.RequestsRetention("SheetJobs", 30)
	require.NoError(t, err)
	_, err = d.RequestsRetention("SheetJobs", 0)
	require.Error(t, err, "a retention of 0 days is refused")
	ctx := context.Background()
	db, err := emu.NewDatabaseIn(ctx, d, append(stmts, retention)...)
	require.NoError(t, err, "Spanner accepts the renamed table and the row deletion policy")
	q, err := New(newClient(t, db), WithTable("SheetJobs"))
	require.NoError(t, err)
	ids, err := q.Enqueue(ctx, Request{Kind: KindCreate, Resource: "s"}, Request{Kind: KindUpdate, Resource: "s"})
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, Request{Kind: KindCreate, Resource: "s"})
	require.ErrorIs(t, err, ErrDuplicateCreate, "the renamed unique index still allows one create")
	got, err := q.List(ctx, "s")
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.ElementsMatch(t, ids, []string{got[0].ID, got[1].ID}, "one commit: ties on CreatedAt are broken by id")
}

func TestEnqueueOfAnExistingIDSaysSoAndWritesNothing(t *testing.T) {
	eachDialect(t, testEnqueueOfAnExistingIDSaysSoAndWritesNothing)
}

func testEnqueueOfAnExistingIDSaysSoAndWritesNothing(t *testing.T, d ddl.Dialect) {
	c := newClient(t, freshDatabaseIn(t, d))
	q, err := New(c)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = q.Enqueue(ctx, Request{ID: "order-17", Kind: KindCreate, Resource: "sheet-1"})
	require.NoError(t, err)

	_, err = q.Enqueue(ctx, Request{Kind: KindCreate, Resource: "sheet-2"}, Request{ID: "order-17", Kind: KindUpdate, Resource: "sheet-1"})
	require.ErrorIs(t, err, ErrDuplicateID)
	require.NotErrorIs(t, err, ErrDuplicateCreate, "an existing id is not a second create")
	require.Contains(t, err.Error(), `"order-17"`)
	n, err := q.Counts(ctx)
	require.NoError(t, err)
	require.Equal(t, map[Status]int64{StatusNew: 1}, n, "the batch wrote nothing")
}
