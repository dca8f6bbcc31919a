package bench

import (
	"sync"
	"time"
)

// recorder collects what a run's contenders observe: when each Lock call
// started and returned, hand-offs, releases and errors. Its methods are
// safe for concurrent use.
type recorder struct {
	windowEnd time.Time // local clock: no Lock call starts after it
	room      *waitRoom

	mu       sync.Mutex
	closed   bool // the drain ended: acquisitions are no longer recorded
	acqs     []acqRecord
	releases map[int64]time.Time // token → commit timestamp of its release, when known
	errors   int
	firstErr error
	cancels  int // Lock calls cancelled at the end of the drain
}

// acqRecord is one completed acquisition.
type acqRecord struct {
	token            int64
	called, returned time.Time // local clock, around the Lock call
	notHandedOver    bool      // the lock says it was not handed over
	fifoViolation    bool
	overtaken        time.Duration // with fifoViolation: how much earlier the longest-waiting overtaken contender started
}

func newRecorder(windowEnd time.Time) *recorder {
	return &recorder{windowEnd: windowEnd, room: newWaitRoom(FIFOTolerance), releases: map[int64]time.Time{}}
}

// begin records that contender id is about to call Lock, and returns the
// time it started waiting.
func (r *recorder) begin(id int) time.Time {
	now := time.Now()
	r.room.enter(id, now)
	return now
}

// acquired records that contender id's Lock call, started at called,
// returned holding a. After close it records nothing.
func (r *recorder) acquired(id int, called time.Time, a acquisition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.room.leave(id)
		return
	}
	// The moment of the acquisition is read under r.mu, so that acquisitions
	// are checked against the waiting room in the order they are recorded.
	now := time.Now()
	violation, overtaken := r.room.acquire(id)
	r.acqs = append(r.acqs, acqRecord{token: a.token, called: called, returned: now,
		notHandedOver: a.notHandedOver, fifoViolation: violation, overtaken: overtaken})
}

// gaveUp records that contender id's Lock call ended without the lock:
// with err, or cancelled at the end of the drain if cancelled is set.
func (r *recorder) gaveUp(id int, err error, cancelled bool) {
	r.room.leave(id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if cancelled {
		r.cancels++
		return
	}
	r.failLocked(err)
}

// failed records an error of an Unlock.
func (r *recorder) failed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failLocked(err)
}

func (r *recorder) failLocked(err error) {
	r.errors++
	if r.firstErr == nil {
		r.firstErr = err
	}
}

// released records when the release of token was called (local clock).
func (r *recorder) released(token int64, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releases[token] = at
}

// close stops recording acquisitions: the contenders are being cancelled.
func (r *recorder) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
}

// observations are what a recorder saw, summed up.
type observations struct {
	acquisitions   int
	inWindow       int
	waits          []time.Duration
	handOffs       []time.Duration
	fifoViolations int
	maxOvertaken   time.Duration
	errors         int
	firstErr       error
	cancels        int
}

// summary sums up what r recorded.
func (r *recorder) summary() observations {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := observations{acquisitions: len(r.acqs), errors: r.errors, firstErr: r.firstErr, cancels: r.cancels}
	for _, a := range r.acqs {
		if !a.returned.After(r.windowEnd) {
			o.inWindow++
		}
		if a.fifoViolation {
			o.fifoViolations++
			o.maxOvertaken = max(o.maxOvertaken, a.overtaken)
		}
		o.waits = append(o.waits, a.returned.Sub(a.called))
		if d, ok := handOff(a, r.releases); ok {
			o.handOffs = append(o.handOffs, d)
		}
	}
	return o
}

// handOff returns the hand-off latency of acquisition a: from the call of
// the release of the previous token to a's Lock call returning, both on the
// local clock of the one process that runs every contender. It includes the
// release's own transaction, so it bounds from above the time from the
// release's commit to the next holder knowing. An acquisition that the lock
// says was not handed over gives no sample.
func handOff(a acqRecord, releases map[int64]time.Time) (time.Duration, bool) {
	from := releases[a.token-1]
	if a.notHandedOver || from.IsZero() {
		return 0, false
	}
	return a.returned.Sub(from), true
}
