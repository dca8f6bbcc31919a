package queue

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/internal/bench"
)

// countingClient opens a client of db whose RPCs (unary calls and streams)
// rpcs counts, by method and by the operation their tag names.
func countingClient(b *testing.B, e *emulator.Emulator, db string, rpcs *bench.RPCCounter) *spanner.Client {
	b.Helper()
	c, err := e.NewClient(context.Background(), db, rpcs.ClientOptions()...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c
}

// benchDialect is BenchmarkWorkers' dialect: go test -bench BenchmarkWorkers
// ./queue -args -queue.dialect=postgresql.
var benchDialect = flag.String("queue.dialect", "googlesql", "BenchmarkWorkers: the SQL dialect of its databases (googlesql or postgresql)")

// BenchmarkWorkers measures how fast N workers drain a queue of b.N
// requests, enqueued beforehand: resources with a create and 4 updates each,
// enqueued in one commit per resource batch. It reports requests handled per
// second and Spanner RPCs per request (every unary call and stream the
// workers' clients open: scans, claims, finishes, locks, renewals, session
// upkeep), less those made in transaction attempts Spanner aborted, which
// it reports apart (aborted-RPCs/req): the emulator aborts every read-write
// transaction that overlaps another, production only conflicting ones.
func BenchmarkWorkers(b *testing.B) {
	if emu == nil {
		b.Skip("needs the emulator (skipped with -short)")
	}
	for _, workers := range []int{1, 4, 16} {
		b.Run(fmt.Sprint(workers), func(b *testing.B) {
			benchWorkers(b, workers)
		})
	}
}

// freshEmulator starts an emulator process of b's own. The emulator's
// commit timestamps run further ahead of the local clock with every commit
// it has made (about 3 ms per 500 requests handled here), and strong reads
// wait that lead out: on a shared emulator, each run would be slower than
// the one before it.
func freshEmulator(b *testing.B, d ddl.Dialect) *emulator.Emulator {
	b.Helper()
	bin, err := emulator.FindBinary()
	if err != nil {
		b.Fatal(err)
	}
	e, err := emulator.Start(context.Background(), emulator.WithBinary(bin), emulator.WithDialect(d))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e
}

func benchWorkers(b *testing.B, workers int) {
	ctx := context.Background()
	d, err := ddl.ParseDialect(*benchDialect)
	if err != nil {
		b.Fatal(err)
	}
	e := freshEmulator(b, d)
	reqs, err := d.RequestsStatements(ddl.DefaultRequestsTable)
	if err != nil {
		b.Fatal(err)
	}
	db, err := e.NewDatabase(ctx, reqs...)
	if err != nil {
		b.Fatal(err)
	}
	front, err := e.NewClient(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	defer front.Close()
	fq, err := New(front)
	if err != nil {
		b.Fatal(err)
	}
	const perResource = 5 // a create and 4 updates
	total := b.N
	for start := 0; start < total; start += 100 {
		var reqs []Request
		for i := start; i < min(start+100, total); i++ {
			kind := KindUpdate
			if i%perResource == 0 {
				kind = KindCreate
			}
			reqs = append(reqs, Request{Kind: kind, Resource: fmt.Sprintf("r%06d", i/perResource)})
		}
		if _, err := fq.Enqueue(ctx, reqs...); err != nil {
			b.Fatal(err)
		}
	}

	rpcs := bench.NewRPCCounter()
	nclients := min(workers, 4)
	var ws []*Worker
	queues := make([]*Queue, nclients)
	for i := range queues {
		q, err := New(countingClient(b, e, db, rpcs), WithLockOptions(spanmutex.WithLease(5*time.Second)))
		if err != nil {
			b.Fatal(err)
		}
		queues[i] = q
	}
	for i := range workers {
		w, err := queues[i%nclients].NewWorker(func(context.Context, *Job) error { return nil },
			WithPollInterval(20*time.Millisecond, 200*time.Millisecond))
		if err != nil {
			b.Fatal(err)
		}
		ws = append(ws, w)
	}
	completed := func() int64 {
		var n int64
		for _, w := range ws {
			n += w.Stats().RequestsCompleted
		}
		return n
	}

	before := rpcs.Counts()
	opsBefore, _ := rpcs.OpCounts()
	abortedBefore := rpcs.AbortedAttempts()
	runCtx, stop := context.WithCancel(ctx)
	errc := make(chan error, workers)
	b.ResetTimer()
	start := time.Now()
	for _, w := range ws {
		go func() { errc <- w.Run(runCtx) }()
	}
	deadline := time.Now().Add(10 * time.Minute)
	tick := time.NewTicker(10 * time.Millisecond)
	for completed() < int64(total) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d requests complete after 10 minutes", completed(), total)
		}
		<-tick.C
	}
	tick.Stop()
	took := time.Since(start)
	n := bench.TotalRPCs(bench.RPCsSince(rpcs.Counts(), before))
	ops, _ := rpcs.OpCounts()
	aborted := bench.RPCsSince(rpcs.AbortedAttempts(), abortedBefore)
	wasted := bench.TotalRPCs(aborted)
	b.StopTimer()
	stop()
	for range ws {
		if err := <-errc; err != nil {
			b.Error(err)
		}
	}
	b.ReportMetric(float64(total)/took.Seconds(), "req/s")
	b.ReportMetric(float64(n-wasted)/float64(total), "RPCs/req")
	b.ReportMetric(float64(wasted)/float64(total), "aborted-RPCs/req")
	logWorkerStats(b, ws, total)
	logOps(b, bench.RPCsSince(ops, opsBefore), aborted, total)
}

// logOps logs the workers' RPCs per request of total by operation (the
// tags of the queue's and the locks' calls), with in brackets those of
// them made in transaction attempts Spanner aborted.
func logOps(b *testing.B, ops, aborted map[string]int64, total int) {
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(ops)) {
		part := fmt.Sprintf("%s %.2f", op, float64(ops[op])/float64(total))
		if aborted[op] > 0 {
			part += fmt.Sprintf(" (%.2f in aborted attempts)", float64(aborted[op])/float64(total))
		}
		parts = append(parts, part)
	}
	b.Logf("RPCs per request by operation: %s", strings.Join(parts, ", "))
}

// logWorkerStats logs what the workers ws did per request of total: where
// the queue's own RPCs went (the rest of RPCs/req are the locks').
func logWorkerStats(b *testing.B, ws []*Worker, total int) {
	st := sumStats(ws)
	per := func(v int64) float64 { return float64(v) / float64(total) }
	b.Logf("per request: scans %.2f, reads %.2f, skipped %.2f, tenures %.2f (idle %.2f), transactions %.2f",
		per(st.Scans), per(st.Reads), per(st.Skipped), per(st.Tenures), per(st.IdleTenures), per(st.Transactions))
}
