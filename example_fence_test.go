package spanmutex_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
)

// TryLock takes a lock only if it is free, and otherwise says who holds it,
// without waiting or joining the queue.
func ExampleLock_TryLock() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // always bound ctx
	defer cancel()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	a, err := spanmutex.NewLock(emu.Client(), "nightly-report", spanmutex.WithOwner("replica-1"))
	if err != nil {
		log.Fatal(err)
	}
	b, err := spanmutex.NewLock(emu.Client(), "nightly-report", spanmutex.WithOwner("replica-2"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := a.TryLock(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = b.TryLock(ctx)
	var held *spanmutex.HeldError
	if errors.As(err, &held) {
		fmt.Printf("replica-2 skips it: held by %s with token %d\n", held.Holder, held.Token)
	}
	if err := a.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// replica-2 skips it: held by replica-1 with token 1
}

// Guard fences writes in your own Spanner transaction: they commit only
// while the lease is held. After Unlock, or a takeover, Guard refuses and
// the transaction rolls back.
func ExampleLease_Guard() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	emu, err := emulator.Start(ctx, emulator.WithDDL(
		"CREATE TABLE Orders (ID STRING(64) NOT NULL, Status STRING(16)) PRIMARY KEY (ID)"))
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()
	client := emu.Client()

	l, err := spanmutex.NewLock(client, "orders/42")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := l.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	write := func(status string) error {
		_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			if err := lease.Guard(ctx, txn); err != nil {
				return err // rolls back: the lease is not ours any more
			}
			return txn.BufferWrite([]*spanner.Mutation{
				spanner.InsertOrUpdate("Orders", []string{"ID", "Status"}, []any{"42", status})})
		})
		return err
	}
	fmt.Println("while held:", write("shipped"))
	if err := l.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	err = write("cancelled") // refused: the lease was released
	fmt.Println("after Unlock, released:", errors.Is(err, spanmutex.ErrReleased))
	// Output:
	// while held: <nil>
	// after Unlock, released: true
}

// GuardSQL puts Guard's check in a statement you run anyway: one round
// trip reads your rows and says whether the lease still holds. Write only
// if it does; if not, Guard says why.
func ExampleLease_GuardSQL() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	emu, err := emulator.Start(ctx, emulator.WithDDL(
		"CREATE TABLE Orders (ID STRING(64) NOT NULL, Status STRING(16)) PRIMARY KEY (ID)"))
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()
	client := emu.Client()

	l, err := spanmutex.NewLock(client, "orders/42")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := l.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	ship := func() error {
		_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			// One row whatever Orders holds: the guard's answer, and the
			// order's status if it exists.
			stmt := spanner.Statement{SQL: "SELECT " + lease.GuardSQL(ddl.GoogleSQL) + " AS held, o.Status" +
				" FROM (SELECT 1) AS one LEFT JOIN Orders AS o ON o.ID = '42'"}
			row, err := txn.Query(ctx, stmt).Next()
			if err != nil {
				return err
			}
			var held bool
			var status spanner.NullString
			if err := row.Columns(&held, &status); err != nil {
				return err
			}
			if !held {
				return lease.Guard(ctx, txn) // why not: lost, or released
			}
			return txn.BufferWrite([]*spanner.Mutation{
				spanner.InsertOrUpdate("Orders", []string{"ID", "Status"}, []any{"42", "shipped"})})
		})
		return err
	}
	fmt.Println("while held:", ship())
	if err := l.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after Unlock, released:", errors.Is(ship(), spanmutex.ErrReleased))
	// Output:
	// while held: <nil>
	// after Unlock, released: true
}

// A Fence protects a resource outside Spanner: each operation carries the
// holder's token, and a token lower than one already accepted (a holder
// that paused past its lease and came back) is refused.
func ExampleFence() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	fence, err := spanmutex.NewFence(emu.Client())
	if err != nil {
		log.Fatal(err)
	}
	// The resource's side, before applying each write:
	fmt.Println("token 2:", fence.Admit(ctx, "bucket/report.csv", "reports", 2))
	fmt.Println("token 2 again:", fence.Admit(ctx, "bucket/report.csv", "reports", 2))
	err = fence.Admit(ctx, "bucket/report.csv", "reports", 1) // the old holder, late
	fmt.Println("token 1 stale:", errors.Is(err, spanmutex.ErrStaleToken))
	// Output:
	// token 2: <nil>
	// token 2 again: <nil>
	// token 1 stale: true
}
