package sheets_test

import (
	"context"
	"fmt"

	"github.com/spanmutex/spanmutex/examples/spreadsheets/sheets"
)

// A worker that was taken over writes with its old token: the store applies
// the write, as a spreadsheet API would, and records the violation.
func ExampleStore() {
	store, err := sheets.NewStore(sheets.WithWriteDuration(0))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	_ = store.Create(ctx, "budget", 1, "create-request")
	_ = store.Update(ctx, "budget", 3, []sheets.Click{{Key: "click-1", Payload: []byte(`{"A1":1}`)}})
	// A zombie holding token 2 wakes up and writes.
	_ = store.Update(ctx, "budget", 2, []sheets.Click{{Key: "click-2", Payload: []byte(`{"A1":2}`)}})

	for _, v := range store.Violations() {
		fmt.Println(v)
	}
	sum := store.Summary()
	fmt.Println(sum.Updates, "updates,", sum.Clicks, "clicks,", sum.Violations[sheets.StaleToken], "stale-token write")
	// Output:
	// stale token on sheet "budget" (write #3, token 2): the sheet has already seen token 3
	// 2 updates, 2 clicks, 1 stale-token write
}
