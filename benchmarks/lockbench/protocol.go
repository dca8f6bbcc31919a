package lockbench

import "time"

// A contender process is this same binary, started again with ChildEnv set.
// The parent and a child talk in lines:
//
//	parent → child (stdin):  the spec, as one line of JSON
//	child → parent (stdout): "ready" once its clients and locks are set up
//	parent → child:          "go START END": the window, in CLOCK_MONOTONIC ns
//	child → parent:          "done" once it has written its result file
//
// A queue worker child writes "n COMPLETED" lines as it completes requests
// instead, and stops when it reads "stop". Anything a child writes to stderr
// is kept and shown if it fails.

// ChildEnv is the environment variable that makes a process a contender.
const ChildEnv = "LOCKBENCH_CHILD"

// Roles of a child.
const (
	roleLock    = "lock"
	roleQueue   = "queue"
	roleRunOnce = "runonce"
	roleIdle    = "idle"
)

// spec is what a child is told to do.
type spec struct {
	Role       string
	Kind       Kind
	Proc       int // this process's index in its run
	Goroutines int
	Emulator   string // the emulator's host:port (Spanner locks, queue)
	Database   string // the database's full path
	Etcd       string // etcd's client endpoint
	Name       string // the lock's name (etcd: key prefix)
	Hold       time.Duration
	Drain      time.Duration
	Dir        string // the run's shared directory: counter and holder files
	Out        string // where the child writes its result, as JSON
	// RPCLatency makes each Spanner RPC take at least its method's
	// figure: the production latency model (bench.ParseLatency); nil: none.
	RPCLatency map[string]time.Duration
	// Idle is what an idle child does (roleIdle; idle_child.go).
	Idle idleSpec
}

// call is one Lock call, as a contender saw it. Times are CLOCK_MONOTONIC
// nanoseconds (see clock.go).
type call struct {
	Proc, G  int
	Called   int64 // Lock called
	Returned int64 // Lock returned, with or without the lock
	Acquired bool
	// Cancelled: the call was still waiting when the drain ended.
	Cancelled bool
	// With Acquired: Released is when Unlock was called (after the
	// critical section), Unlocked when it returned.
	Released, Unlocked int64
	Token              int64 // Spanner locks: the fencing token
	HandedOff          bool  // spanmutex: Lease.HandedOff
	// Entry (spanmutex): when the call's place in line was fixed, by
	// Spanner's clock, in Unix nanoseconds: its queue entry's commit
	// (Lease.QueuedAt), or, for a lock taken without queueing, the
	// acquisition's (Lease.AcquiredAt).
	Entry        int64
	UnlockFailed bool
	// Overlap: on entering the critical section, another holder's marker
	// file was there.
	Overlap bool
}

// grant is what a Lock call that got the lock says of it.
type grant struct {
	token     int64
	handedOff bool
	entry     int64 // see call.Entry; 0 if unknown
}

// lockResult is a lock child's result.
type lockResult struct {
	Proc  int
	Calls []call
	// RPCs from the start of the window until the child stopped, by method;
	// by the operation their Spanner tag names, and of those the ones owed
	// to aborts (bench's AbortedAttempts).
	RPCs                  map[string]int64
	RPCsByOp, AbortedByOp map[string]int64
	// CommitLead is how far the process's last commit timestamp was ahead
	// of the local clock (Spanner only; 0 for etcd).
	CommitLead time.Duration
	Errors     int
	FirstError string
}

// queueResult is a queue worker child's result.
type queueResult struct {
	Proc      int
	Completed int64
	Failed    int64
	RPCs      map[string]int64
	// RPCsByOp counts the calls by the operation their tag names,
	// AbortedByOp those of them owed to aborts (bench's AbortedAttempts).
	RPCsByOp, AbortedByOp map[string]int64
	Err                   string
}
