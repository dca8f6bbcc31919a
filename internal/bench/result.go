package bench

import (
	"math"
	"time"
)

// Result is what one run (one lock, one number of contenders) measured. See
// the package documentation for how each figure is defined.
type Result struct {
	Kind       Kind
	Contenders int
	Clients    int           // Spanner clients the contenders were spread over
	Duration   time.Duration // the window during which Lock calls started

	// Acquisitions counts Lock calls that returned holding the lock before
	// the drain ended; InWindow, those of them that returned within Duration.
	Acquisitions int
	InWindow     int
	// Cancelled counts Lock calls still waiting when the drain ended.
	Cancelled int

	// RPCs started by the run's clients from the start of the window until
	// every contender stopped, in total and by gRPC method ("Commit",
	// "ExecuteStreamingSql", ...). Commits and Reads pick methods out.
	RPCs         int64
	RPCsByMethod map[string]int64

	// WaitP50 and WaitP99: from calling Lock to holding the lock.
	WaitP50, WaitP99 time.Duration
	// FIFOViolations counts acquisitions made while another contender that
	// started waiting at least FIFOTolerance earlier was still waiting.
	FIFOViolations int
	// MaxOvertaken is, over the FIFO violations, the longest head start of
	// a contender that was overtaken (how much earlier it had called Lock
	// than the contender that overtook it).
	MaxOvertaken time.Duration
	// HandOffs counts the acquisitions that gave a hand-off latency sample;
	// HandOffP50 and HandOffP99 are taken over them.
	HandOffs               int
	HandOffP50, HandOffP99 time.Duration

	// CommitLeadP50 and CommitLeadMax say how far Spanner's commit
	// timestamps were ahead of the local clock when the run's Commit calls
	// returned (negative: behind). That is why hand-off latencies are
	// measured on the local clock alone.
	CommitLeadP50, CommitLeadMax time.Duration

	// Errors counts Lock and Unlock calls that failed (other than by the
	// cancellation at the end of the drain); FirstError is the first one.
	Errors     int
	FirstError string
	// Warnings counts what the locks logged at warning level, by message
	// (spanmutex only).
	Warnings map[string]int
	// Stopped is how long after the window every contender had stopped.
	Stopped time.Duration
}

// PerSecond returns the acquisitions completed within the window per
// second of the window.
func (r Result) PerSecond() float64 {
	if r.Duration <= 0 {
		return math.NaN()
	}
	return float64(r.InWindow) / r.Duration.Seconds()
}

// Commits returns the run's Commit RPCs: one per read-write transaction
// attempt that got as far as committing, those Spanner aborted at commit
// included. An attempt aborted at a read, or one that gives up (the naive
// lock finding the lock held), sends a Rollback or nothing instead: its cost
// shows in Reads and RPCs.
func (r Result) Commits() int64 { return r.RPCsByMethod["Commit"] }

// readMethods are the gRPC methods that read: point and key-range reads
// and queries. ExecuteSql is not among them: Go's client sends queries
// through ExecuteStreamingSql and DML (spanmutex's deletes of queue
// entries) through ExecuteSql.
var readMethods = []string{"StreamingRead", "Read", "ExecuteStreamingSql"}

// Reads returns the run's read RPCs (readMethods): lock-free snapshot reads,
// and the reads and queries inside read-write transactions.
func (r Result) Reads() int64 {
	var n int64
	for _, m := range readMethods {
		n += r.RPCsByMethod[m]
	}
	return n
}

// PerAcquisition returns count divided by the acquisitions, or NaN if there
// were none.
func (r Result) PerAcquisition(count int64) float64 {
	if r.Acquisitions == 0 {
		return math.NaN()
	}
	return float64(count) / float64(r.Acquisitions)
}

// Ratio compares the naive lock with spanmutex at one number of
// contenders, from results measured in the same Run. A ratio is NaN when
// it is undefined (neither lock acquired anything, or the naive lock did not
// and the ratio is per acquisition), and +Inf when only the numerator is
// non-zero.
type Ratio struct {
	Contenders int
	// Commits is naive ÷ spanmutex, in Commit RPCs per acquisition.
	Commits float64
	// RPCs is naive ÷ spanmutex, per acquisition.
	RPCs float64
	// Throughput is spanmutex ÷ naive, in acquisitions per second.
	Throughput float64
}

// Ratios returns a Ratio for every number of contenders that results hold
// both locks for, in the order of the spanmutex results.
func Ratios(results []Result) []Ratio {
	naive := map[int]Result{}
	for _, r := range results {
		if r.Kind == Naive {
			naive[r.Contenders] = r
		}
	}
	var out []Ratio
	for _, ours := range results {
		theirs, ok := naive[ours.Contenders]
		if ours.Kind != Spanmutex || !ok {
			continue
		}
		out = append(out, Ratio{
			Contenders: ours.Contenders,
			Commits:    ratio(theirs.PerAcquisition(theirs.Commits()), ours.PerAcquisition(ours.Commits())),
			RPCs:       ratio(theirs.PerAcquisition(theirs.RPCs), ours.PerAcquisition(ours.RPCs)),
			Throughput: ratio(ours.PerSecond(), theirs.PerSecond()),
		})
	}
	return out
}

// ratio returns a ÷ b: NaN if either is NaN or both are 0, +Inf if only b
// is 0.
func ratio(a, b float64) float64 {
	switch {
	case math.IsNaN(a) || math.IsNaN(b) || (a == 0 && b == 0):
		return math.NaN()
	case b == 0:
		return math.Inf(1)
	}
	return a / b
}
