package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spanmutex/spanmutex/examples/spreadsheets/sheets"
)

// sheetsOpKind is what one HTTP call of the load does.
type sheetsOpKind int

const (
	opCreateSheet sheetsOpKind = iota // POST /sheets: must get 202
	opClick                           // POST /sheets/{id}/updates: must get 202
	opDuplicate                       // POST /sheets of an existing sheet: must get 409
)

// sheetsOp is one HTTP call of the load.
type sheetsOp struct {
	kind  sheetsOpKind
	sheet int // index of the sheet
	click int // the click's number, for opClick: it is in the payload
}

// sheetsPlan returns the load in the order it is sent: every sheet's
// create, clicks on random sheets, and duplicate creates of random sheets,
// shuffled, except that each sheet's create comes before its other calls.
func sheetsPlan(rng *rand.Rand, nSheets, clicks, duplicates int) []sheetsOp {
	ops := make([]sheetsOp, 0, nSheets+clicks+duplicates)
	for i := range nSheets {
		ops = append(ops, sheetsOp{kind: opCreateSheet, sheet: i})
	}
	for c := range clicks {
		ops = append(ops, sheetsOp{kind: opClick, sheet: rng.IntN(nSheets), click: c + 1})
	}
	for range duplicates {
		ops = append(ops, sheetsOp{kind: opDuplicate, sheet: rng.IntN(nSheets)})
	}
	rng.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
	// Move each sheet's create to the first place any call of it holds.
	first := make([]int, nSheets)
	for i := range first {
		first[i] = -1
	}
	for i, op := range ops {
		if first[op.sheet] < 0 {
			first[op.sheet] = i
		}
		if op.kind == opCreateSheet && first[op.sheet] != i {
			ops[i], ops[first[op.sheet]] = ops[first[op.sheet]], ops[i]
		}
	}
	return ops
}

// sheetID is the id of sheet i in this run.
func (d *sheetsDemo) sheetID(i int) string { return fmt.Sprintf("sheet-%s-%04d", d.suffix, i) }

// clickPayload is the payload of click n: its number, so that the checks
// can find each click in its sheet.
func clickPayload(n int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"click":%d}`, n)) }

// acceptedRequest is a request the front end accepted (202).
type acceptedRequest struct {
	sheet string
	kind  string
	click int // for an update
}

// sheetsLoad is what the load sent and what it was answered. Its methods
// are safe for concurrent use.
type sheetsLoad struct {
	total   int
	sent    atomic.Int64
	refused atomic.Int64 // duplicates answered 409

	mu         sync.Mutex
	requests   map[string]acceptedRequest // by request id
	unexpected []string                   // the first few unexpected answers
	nUnexpect  int
	began      time.Time
	ended      time.Time
}

// newSheetsLoad returns the record of a load of total calls.
func newSheetsLoad(total int) *sheetsLoad {
	return &sheetsLoad{total: total, requests: map[string]acceptedRequest{}}
}

// accepted returns how many requests the front end accepted.
func (l *sheetsLoad) accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.requests)
}

// unexpectedAnswer records an answer the plan did not expect.
func (l *sheetsLoad) unexpectedAnswer(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nUnexpect++
	if len(l.unexpected) < 5 {
		l.unexpected = append(l.unexpected, fmt.Sprintf(format, args...))
	}
}

// accept records an accepted request.
func (l *sheetsLoad) accept(id string, r acceptedRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests[id] = r
}

// drive sends the plan through the HTTP API with --senders calls in
// flight, each sheet's create answered before its other calls go. When a
// quarter of the calls have been handed out it arms the kill switch (with
// --kill): the next worker to start a job dies. It records the answers in load, and returns when every call was
// answered, or ctx ended.
func (d *sheetsDemo) drive(ctx context.Context, load *sheetsLoad, ops []sheetsOp) error {
	load.mu.Lock()
	load.began = time.Now()
	load.mu.Unlock()
	api, err := sheets.NewClient(d.svc.url, &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: d.opts.senders},
		Timeout:   2 * time.Minute, // the emulator can be slow to commit under load
	})
	if err != nil {
		return err
	}
	created := make([]chan struct{}, d.opts.sheets) // closed once sheet i's create is answered
	for i := range created {
		created[i] = make(chan struct{})
	}
	work := make(chan sheetsOp)
	var wg sync.WaitGroup
	for range d.opts.senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for op := range work {
				d.send(ctx, api, load, op, created)
			}
		}()
	}
	armAt := len(ops) / 4
feed:
	for i, op := range ops {
		if d.opts.kill && i == armAt {
			d.svc.kill.armed.Store(true)
			d.out.Printf("  -- %d of %d calls sent: the next worker to start a job will die in it --\n", i, len(ops))
		}
		select {
		case work <- op:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	load.mu.Lock()
	load.ended = time.Now()
	load.mu.Unlock()
	return ctx.Err()
}

// send makes one call of the plan and records its answer.
func (d *sheetsDemo) send(ctx context.Context, api *sheets.Client, load *sheetsLoad, op sheetsOp, created []chan struct{}) {
	id := d.sheetID(op.sheet)
	if op.kind != opCreateSheet {
		select {
		case <-created[op.sheet]:
		case <-ctx.Done():
			return
		}
	}
	defer load.sent.Add(1)
	switch op.kind {
	case opCreateSheet:
		defer close(created[op.sheet])
		a, err := api.Create(ctx, id)
		if err != nil {
			load.unexpectedAnswer("create of %s: %v", id, err)
			return
		}
		load.accept(a.Request, acceptedRequest{sheet: id, kind: a.Kind})
	case opClick:
		a, err := api.Update(ctx, id, clickPayload(op.click))
		if err != nil {
			load.unexpectedAnswer("click %d on %s: %v", op.click, id, err)
			return
		}
		load.accept(a.Request, acceptedRequest{sheet: id, kind: a.Kind, click: op.click})
	case opDuplicate:
		a, err := api.Create(ctx, id)
		switch {
		case sheets.IsStatus(err, http.StatusConflict):
			load.refused.Add(1)
		case err != nil:
			load.unexpectedAnswer("duplicate create of %s: %v", id, err)
		default:
			load.accept(a.Request, acceptedRequest{sheet: id, kind: a.Kind})
			load.unexpectedAnswer("duplicate create of %s: accepted as request %s, want 409", id, a.Request)
		}
	}
}
