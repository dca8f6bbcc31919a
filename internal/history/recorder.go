package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// Recorder records the operations of concurrent clients. Its methods are
// safe for concurrent use; the zero value is not usable, create one with
// NewRecorder.
type Recorder struct {
	start time.Time // carries the monotonic clock reading every offset is taken from

	mu      sync.Mutex
	next    int
	done    []Op
	pending map[int]*Op
}

// NewRecorder returns a Recorder whose clock starts now.
func NewRecorder() *Recorder {
	return &Recorder{start: time.Now(), pending: map[int]*Op{}}
}

// Now returns the local monotonic time since the Recorder started.
func (r *Recorder) Now() time.Duration { return time.Since(r.start) }

// Call is an operation that has been invoked and has not yet returned.
type Call struct {
	r    *Recorder
	id   int
	once sync.Once
}

// Result is how an operation returned.
type Result struct {
	// Kind, if set, replaces the operation's kind: what the call turned
	// out to be (a Run that found the section done is a SeeDone).
	Kind     Kind
	Outcome  Outcome
	Token    int64     // set if learned on return (acquisitions); 0 keeps the invoked token
	Takeover bool      // acquisitions: Lease.TookOver
	Commit   time.Time // the Spanner commit timestamp, if known
	Err      error
	Note     string
	// Acquisitions: the lease the holder declared, Lease.HandedOff, and
	// for a call that returned no lease, what its error matched.
	Lease     time.Duration
	HandedOff bool
	Refusal   Refusal
}

// Begin records the invocation of o now, and returns the Call to end when
// it returns. o's ID, Call, Return and Outcome are set by the Recorder.
func (r *Recorder) Begin(o Op) *Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	o.ID, o.Call, o.Return, o.Outcome = r.next, r.Now(), Never, Unknown
	r.pending[o.ID] = &o
	return &Call{r: r, id: o.ID}
}

// End records that the call returned now, with res. Only the first End of
// a Call counts.
func (c *Call) End(res Result) {
	c.once.Do(func() {
		r := c.r
		r.mu.Lock()
		defer r.mu.Unlock()
		o := r.pending[c.id]
		delete(r.pending, c.id)
		o.Return, o.Outcome = r.Now(), res.Outcome
		if res.Kind != "" {
			o.Kind = res.Kind
		}
		if res.Token != 0 {
			o.Token = res.Token
		}
		o.Takeover = o.Takeover || res.Takeover
		if !res.Commit.IsZero() {
			o.Commit = res.Commit
		}
		if res.Err != nil {
			o.Err = res.Err.Error()
		}
		if res.Note != "" {
			o.Note = res.Note
		}
		if res.Lease > 0 {
			o.Lease = res.Lease
		}
		o.HandedOff = o.HandedOff || res.HandedOff
		if res.Refusal != "" {
			o.Refusal = res.Refusal
		}
		r.done = append(r.done, *o)
	})
}

// Event records an instantaneous operation (a section's start or end).
func (r *Recorder) Event(o Op) {
	r.Begin(o).End(Result{Outcome: OK, Note: o.Note})
}

// Len returns how many operations have been recorded so far.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.done) + len(r.pending)
}

// Ops returns every operation recorded so far, ordered by ID; those that
// have not returned have Return Never and Outcome Unknown.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	out := slices.Clone(r.done)
	for _, o := range r.pending {
		out = append(out, *o)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Op) int { return a.ID - b.ID })
	return out
}

// ReadJSON reads operations written by WriteJSON.
func ReadJSON(r io.Reader) ([]Op, error) {
	var ops []Op
	dec := json.NewDecoder(r)
	for {
		var o Op
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return ops, nil
		}
		if err != nil {
			return ops, fmt.Errorf("history: operation %d: %w", len(ops)+1, err)
		}
		ops = append(ops, o)
	}
}

// WriteJSON writes ops as JSON, one operation per line.
func WriteJSON(w io.Writer, ops []Op) error {
	enc := json.NewEncoder(w)
	for _, o := range ops {
		if err := enc.Encode(o); err != nil {
			return err
		}
	}
	return nil
}
