package bench

import (
	"context"
	"strings"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
)

// This file exports the pieces of the benchmark that a harness running its
// contenders as separate OS processes (the nested module benchmarks/) needs,
// so that both benchmarks measure the same naive lock and count RPCs the
// same way.

// NaiveLock is one contender of the naive lock (see Naive), for one
// goroutine at a time: Lock, then Unlock, again and again.
type NaiveLock struct{ n *naiveLock }

// NewNaiveLock returns a naive contender named owner on lock name of the
// mutex table (which must exist in client's database).
func NewNaiveLock(client *spanner.Client, table, name, owner string) *NaiveLock {
	return &NaiveLock{n: &naiveLock{client: client, table: table, name: name, owner: owner}}
}

// Lock blocks until this contender holds the lock, backing off while it is
// held, and returns the token it wrote; or it returns ctx's error.
func (l *NaiveLock) Lock(ctx context.Context) (int64, error) {
	a, err := l.n.lock(ctx)
	return a.token, err
}

// Unlock releases the lock if this contender still holds it.
func (l *NaiveLock) Unlock(ctx context.Context) error { return l.n.unlock(ctx) }

// RPCCounter counts the gRPC calls that Spanner clients opened with its
// ClientOptions start, by short method name ("Commit"). Safe for concurrent
// use.
type RPCCounter struct{ c *rpcCounter }

// NewRPCCounter returns a counter with no calls.
func NewRPCCounter() *RPCCounter { return &RPCCounter{c: newRPCCounter()} }

// NewRPCCounterWithLatency returns a counter with no calls whose
// interceptors also make each call take at least latency's figure for
// its method, holding its answer back until then (ParseLatency): wall time
// then counts round trips as production does, the emulator's own time
// included in that figure rather than added to it.
func NewRPCCounterWithLatency(latency map[string]time.Duration) *RPCCounter {
	c := newRPCCounter()
	c.latency = latency
	return &RPCCounter{c: c}
}

// ClientOptions returns the options that install the counting interceptors.
func (r *RPCCounter) ClientOptions() []option.ClientOption { return r.c.clientOptions() }

// DialOptions returns the counting interceptors as gRPC dial options, for
// a client that is not Spanner's (etcd's).
func (r *RPCCounter) DialOptions() []grpc.DialOption { return r.c.dialOptions() }

// OpCounts returns the calls so far by the operation their Spanner tag
// names ("untagged METHOD" for calls without one: sessions, Rollback, a
// BeginTransaction, etcd's),
// and, of them, those Spanner answered ABORTED.
func (r *RPCCounter) OpCounts() (byOp, aborted map[string]int64) { return r.c.opSnapshot() }

// AbortedAttempts returns, by operation, the calls so far that were owed to
// aborts: every call of a read-write transaction attempt Spanner aborted
// (not only the one answered ABORTED), and the explicit BeginTransaction
// with which the Go client begins the retry of one (a first attempt begins
// inline). The emulator aborts every read-write transaction that overlaps
// another; production aborts only conflicting ones.
func (r *RPCCounter) AbortedAttempts() map[string]int64 { return r.c.abortedAttempts() }

// Counts returns the calls so far, by method.
func (r *RPCCounter) Counts() map[string]int64 { return r.c.snapshot() }

// LastCommitLead returns how far the timestamp of the latest successful
// Commit was ahead of the local clock when the call returned, and false if
// there was none. On the emulator it grows with every commit, and strong
// reads wait for it.
func (r *RPCCounter) LastCommitLead() (time.Duration, bool) {
	leads := r.c.commitLeads()
	if len(leads) == 0 {
		return 0, false
	}
	return leads[len(leads)-1], true
}

// TotalRPCs returns the calls of every method in counts, a result of Counts.
func TotalRPCs(counts map[string]int64) int64 { return rpcCounts(counts).total() }

// RPCsSince returns the calls in after that were not yet in before, two
// results of Counts of one counter; methods with none are left out.
func RPCsSince(after, before map[string]int64) map[string]int64 {
	return rpcCounts(after).since(before)
}

// Percentile returns the p-th percentile of samples by the nearest-rank
// method, and false if there are none (see percentile).
func Percentile(samples []time.Duration, p float64) (time.Duration, bool) {
	return percentile(samples, p)
}

// FormatDuration formats a latency as the benchmark's tables do: "-" when
// ok is false.
func FormatDuration(d time.Duration, ok bool) string { return formatDuration(d, ok) }

// FormatFloat formats a per-acquisition figure: "-" when undefined.
func FormatFloat(v float64) string { return formatFloat(v) }

// WriteTable writes a table to b as the benchmark's tables are written:
// header, then the rows fill adds, in columns two spaces apart, with no
// trailing blanks.
func WriteTable(b *strings.Builder, header []string, fill func(row func(cells ...any))) {
	writeTable(b, header, fill)
}
