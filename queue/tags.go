package queue

// The queue's Spanner calls carry tags naming their operation, as the
// Lock's do (spanmutex's tags.go): Spanner's introspection tables then show
// what each costs in production, and a client interceptor can count RPCs by
// operation (lockbench and BenchmarkWorkers do). The resource locks' calls
// carry the Lock's own tags.
const (
	tagEnqueue = "spanmutex.queue.enqueue" // Enqueue's transaction
	tagScan    = "spanmutex.queue.scan"    // a worker's read of a page of the pending index
	tagStep    = "spanmutex.queue.step"    // a tenure's step: record an outcome, claim the next job
	tagSettle  = "spanmutex.queue.settle"  // reading back a step or an Enqueue of unknown outcome
)
