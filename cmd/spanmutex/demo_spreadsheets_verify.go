package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spanmutex/spanmutex/examples/spreadsheets/sheets"
	"github.com/spanmutex/spanmutex/queue"
)

// sheetsCheck is one row of the demo's table.
type sheetsCheck struct {
	verdict string // PASS, FAIL or INFO
	what    string
	detail  string
}

// sheetsChecks is the demo's table of checks, filled in by verify's steps.
type sheetsChecks []sheetsCheck

// add appends a check that passed if ok.
func (t *sheetsChecks) add(ok bool, what, format string, args ...any) {
	v := "FAIL"
	if ok {
		v = "PASS"
	}
	*t = append(*t, sheetsCheck{v, what, fmt.Sprintf(format, args...)})
}

// info appends a figure that is not a check.
func (t *sheetsChecks) info(what, format string, args ...any) {
	*t = append(*t, sheetsCheck{"INFO", what, fmt.Sprintf(format, args...)})
}

// verify reads every request back and prints the table of checks and the
// workers' counts. It reports whether every check passed.
func (d *sheetsDemo) verify(ctx context.Context, res *sheetsRun) (bool, error) {
	rows, err := d.readRequests(ctx)
	if err != nil {
		return false, err
	}
	counts, err := d.svc.q.Counts(ctx)
	if err != nil {
		return false, err
	}
	o, load := d.opts, res.load
	load.mu.Lock()
	accepted := load.requests
	unexpected, nUnexpected := load.unexpected, load.nUnexpect
	load.mu.Unlock()

	var t sheetsChecks
	t.add(len(accepted) == o.sheets+o.clicks && nUnexpected == 0, "every HTTP call answered as planned",
		"%d accepted (202) of %d creates and %d clicks; %d unexpected answers", len(accepted), o.sheets, o.clicks, nUnexpected)
	byID := checkFinished(&t, rows)
	checkAccounted(&t, accepted, byID, counts)
	d.checkStore(&t, rows, load)
	recovered := d.reportWork(&t)
	if o.kill {
		ok, detail := d.checkRecovery(byID, recovered, res.zombieErr)
		t.add(ok, "the killed worker's claim was recovered", "%s", detail)
	}
	elapsed := res.drained.Sub(load.began)
	t.info("throughput", "%d requests in %v from the first call to nothing pending: %.0f requests/s",
		len(accepted), elapsed.Round(100*time.Millisecond), float64(len(accepted))/elapsed.Seconds())

	d.printChecks(t)
	d.printWorkers()
	d.printProblems(unexpected)
	return d.tally(t), nil
}

// checkFinished checks that every request finished, and returns them by id.
func checkFinished(t *sheetsChecks, rows []queue.Request) map[string]queue.Request {
	byID := map[string]queue.Request{}
	complete, failed, noReason := 0, 0, 0
	for _, r := range rows {
		byID[r.ID] = r
		switch {
		case r.Status == queue.StatusComplete:
			complete++
		case r.Status == queue.StatusError:
			failed++
			if r.LastError == "" {
				noReason++
			}
		}
	}
	t.add(complete+failed == len(rows) && noReason == 0, "every request finished: complete, or error with a reason",
		"%d complete, %d error (%d without a reason), of %d", complete, failed, noReason, len(rows))
	return byID
}

// checkAccounted checks that the requests the front end accepted are the
// requests in the table, and that none is left pending.
func checkAccounted(t *sheetsChecks, accepted map[string]acceptedRequest, byID map[string]queue.Request, counts map[queue.Status]int64) {
	lost := 0
	for id := range accepted {
		if r, ok := byID[id]; !ok || !r.Status.Finished() {
			lost++
		}
	}
	phantom := 0
	for id := range byID {
		if _, ok := accepted[id]; !ok {
			phantom++
		}
	}
	t.add(lost == 0 && phantom == 0, "none lost: every accepted request exists and finished",
		"%d of %d accepted requests missing or unfinished; %d requests nobody was told were accepted", lost, len(accepted), phantom)
	t.add(counts[queue.StatusNew]+counts[queue.StatusInProgress] == 0, "none stuck: nothing new or in-progress",
		"%d new, %d in-progress", counts[queue.StatusNew], counts[queue.StatusInProgress])
}

// checkStore checks the spreadsheet store: no violation of each kind, one
// create per sheet, and every completed click applied once.
func (d *sheetsDemo) checkStore(t *sheetsChecks, rows []queue.Request, load *sheetsLoad) {
	o, store := d.opts, d.svc.store
	sum, violations, writes := store.Summary(), store.Violations(), len(store.Log())
	for _, k := range sheets.ViolationKinds() {
		detail := fmt.Sprintf("%d in %d writes to the store", sum.Violations[k], writes)
		for _, v := range violations {
			if v.Kind == k {
				detail += "; first: " + v.String()
				break
			}
		}
		t.add(sum.Violations[k] == 0, "zero "+pluralViolation(k), "%s", detail)
	}
	creates := map[string]int{}
	for _, r := range rows {
		if r.Kind == queue.KindCreate {
			creates[r.Resource]++
		}
	}
	oneCreate := 0
	for i := range o.sheets {
		if creates[d.sheetID(i)] == 1 {
			oneCreate++
		}
	}
	t.add(load.refused.Load() == int64(o.duplicates) && oneCreate == o.sheets, "duplicate creates refused with 409",
		"%d of %d refused; %d of %d sheets have exactly one create request", load.refused.Load(), o.duplicates, oneCreate, o.sheets)
	missing, twice, created := d.clicksApplied(rows)
	t.add(missing == 0 && twice == 0 && created == o.sheets, "every completed request is in its sheet, once",
		"%d of %d sheets created; clicks of completed updates: %d missing, %d applied more than once", created, o.sheets, missing, twice)
}

// reportWork adds what the workers and the front end did to the table, and
// returns how many claims the workers recovered.
func (d *sheetsDemo) reportWork(t *sheetsChecks) (recovered int64) {
	var grouped int64
	for _, sw := range d.svc.workers {
		st := sw.w.Stats()
		grouped += st.Grouped
		recovered += st.Recovered
	}
	sum := d.svc.store.Summary()
	perWrite := 0.0
	if sum.Updates > 0 {
		perWrite = float64(sum.Clicks) / float64(sum.Updates)
	}
	t.info("clicks grouped into updates", "%d clicks applied in %d update writes (%.1f per write); the workers grouped %d requests beyond the first of a job",
		sum.Clicks, sum.Updates, perWrite, grouped)
	fs := d.svc.api.Stats()
	t.info("front end: requests batched", "%d requests enqueued or refused in %d transactions; %d batches split around a refused request",
		fs.Requests, fs.Transactions, fs.SplitBatches)
	t.info("writes done again after a lost lease", "%d writes found their work already applied and skipped it, by request id; "+
		"%d writes aborted in flight as a lease was lost", sum.Replayed, sum.Aborted)
	return recovered
}

// printProblems prints the unexpected HTTP answers and the first
// violations of the store.
func (d *sheetsDemo) printProblems(unexpected []string) {
	for _, u := range unexpected {
		d.out.Printf("  unexpected answer: %s\n", u)
	}
	violations := d.svc.store.Violations()
	for i, v := range violations {
		if i == 5 {
			d.out.Printf("  ... and %d more violations\n", len(violations)-5)
			break
		}
		d.out.Printf("  violation: %s\n", v)
	}
}

// tally counts the passed checks into d.passed and reports whether none
// failed.
func (d *sheetsDemo) tally(t sheetsChecks) bool {
	ok := true
	for _, c := range t {
		switch c.verdict {
		case "PASS":
			d.passed++
		case "FAIL":
			ok = false
		}
	}
	return ok
}

// readRequests reads every request of this run's sheets, a few sheets at a
// time.
func (d *sheetsDemo) readRequests(ctx context.Context) ([]queue.Request, error) {
	var (
		mu   sync.Mutex
		all  []queue.Request
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 8)
	)
	for i := range d.opts.sheets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			reqs, err := d.svc.q.List(ctx, d.sheetID(i))
			mu.Lock()
			defer mu.Unlock()
			all = append(all, reqs...)
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, fmt.Errorf("read the requests back: %w", errs[0])
	}
	return all, nil
}

// clicksApplied compares the queue with the store: how many clicks of
// completed updates are missing from their sheet, how many were applied
// more than once, and how many sheets the store holds.
func (d *sheetsDemo) clicksApplied(rows []queue.Request) (missing, twice, created int) {
	applied := map[string]map[int]int{} // sheet → click → times applied
	for i := range d.opts.sheets {
		id := d.sheetID(i)
		sh, ok := d.svc.store.Sheet(id)
		if !ok {
			continue
		}
		created++
		applied[id] = map[int]int{}
		for _, p := range sh.Payloads {
			var c struct{ Click int }
			if json.Unmarshal(p, &c) == nil {
				applied[id][c.Click]++
			}
		}
	}
	for _, r := range rows {
		if r.Kind != queue.KindUpdate || r.Status != queue.StatusComplete {
			continue
		}
		var c struct{ Click int }
		if err := json.Unmarshal(r.Payload, &c); err != nil {
			missing++
			continue
		}
		switch n := applied[r.Resource][c.Click]; {
		case n == 0:
			missing++
		case n > 1:
			twice++
		}
	}
	return missing, twice, created
}

// checkRecovery checks that the requests the killed worker died holding
// were claimed again by another worker, with a higher token, and completed;
// since the check runs after the dead worker was woken and tried to record
// its own outcome, it also shows that outcome was rejected.
func (d *sheetsDemo) checkRecovery(byID map[string]queue.Request, recovered int64, zombieErr error) (bool, string) {
	sw := d.svc.kill.killed()
	if sw == nil {
		return false, "the kill switch was armed but no worker started a job after it"
	}
	dd := sw.death
	done, higher := 0, 0
	var tokens []string
	for _, id := range dd.requests {
		r := byID[id]
		if r.Status == queue.StatusComplete {
			done++
		}
		if r.Token > dd.token {
			higher++
		}
		tokens = append(tokens, fmt.Sprint(r.Token))
	}
	n := len(dd.requests)
	detail := fmt.Sprintf("worker %d died holding the %s of %s (token %d, %d request(s)); the others recovered %d claimed request(s); "+
		"%d of %d complete under a higher token (%s); its late outcome left them so",
		sw.n, dd.kind, dd.sheet, dd.token, n, recovered, min(done, higher), n, strings.Join(tokens, ", "))
	if zombieErr != nil {
		detail += "; on waking it said: " + oneLine(zombieErr.Error(), 100)
	}
	return recovered >= 1 && done == n && higher == n, detail
}

// pluralViolation names a kind of violation as the table counts it.
func pluralViolation(k sheets.ViolationKind) string {
	switch k {
	case sheets.DoubleCreate:
		return "double creates"
	case sheets.UpdateBeforeCreate:
		return "updates before their create"
	case sheets.ConcurrentWriters:
		return "concurrent writers on one sheet"
	case sheets.StaleToken:
		return "stale-token writes"
	}
	return k.String()
}

// printChecks prints the table of checks.
func (d *sheetsDemo) printChecks(table sheetsChecks) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\n  RESULT\tCHECK\tDETAIL")
	for _, c := range table {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.verdict, c.what, c.detail)
	}
	_ = tw.Flush()
	d.out.Printf("%s", trimLines(b.String()))
}

// printWorkers prints what each worker did.
func (d *sheetsDemo) printWorkers() {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\n  WORKER\tJOBS\tCOMPLETED\tERROR\tGROUPED\tSKIPPED\tRECOVERED\tLEASES LOST\t")
	for _, sw := range d.svc.workers {
		st := sw.w.Stats()
		name := fmt.Sprintf("%d", sw.n)
		if sw.didCrash() {
			name += " (killed)"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", name, st.Jobs, st.RequestsCompleted, st.RequestsFailed,
			st.Grouped, st.Skipped, st.Recovered, st.LeasesLost)
	}
	_ = tw.Flush()
	d.out.Printf("%s", trimLines(b.String()))
}

// trimLines removes the spaces tabwriter leaves at the ends of lines.
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}
