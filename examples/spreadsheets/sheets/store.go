package sheets

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// DefaultWriteDuration is how long a write takes unless WithWriteDuration
// says otherwise: long enough for two overlapping writers to be seen.
const DefaultWriteDuration = 2 * time.Millisecond

// StoreOption configures a Store.
type StoreOption func(*storeConfig)

type storeConfig struct {
	writeDuration time.Duration
	latency       func(Op) time.Duration
}

// WithWriteDuration sets how long each write is in flight (default
// DefaultWriteDuration; 0 makes writes instant, so that only writers that
// overlap exactly are seen).
func WithWriteDuration(d time.Duration) StoreOption {
	return func(c *storeConfig) { c.writeDuration, c.latency = d, nil }
}

// WithWriteLatency sets how long each write is in flight by the write (its
// kind, sheet, token); it overrides WithWriteDuration. Negative durations
// count as 0.
func WithWriteLatency(latency func(Op) time.Duration) StoreOption {
	return func(c *storeConfig) { c.latency = latency }
}

// Store stands in for the spreadsheet API: sheets kept in memory. It is safe
// for concurrent use. Every write (Create, Update) is recorded in its log
// with its fencing token, and checked for the violations of violation.go
// when it begins. A write is in flight for the store's write duration, then
// applied; a write whose context ends first is recorded as aborted and not
// applied.
//
// Writes are idempotent by key, as a back end must make them: a worker may
// apply a write and lose its lease before it can record the request
// complete, and the worker that takes the sheet over then does the request
// again. A create with the key of the sheet's own create, and the clicks of
// an update whose keys were already applied, are replays: recorded, not
// applied again, and no violation (unless their token is stale). The zero
// value is not usable; call NewStore.
type Store struct {
	latency func(Op) time.Duration

	mu         sync.Mutex
	sheets     map[string]*sheetState
	log        []Op
	violations []Violation
}

// Click is one click of an update: its key (the queue request's id) and
// what it sends back.
type Click struct {
	Key     string
	Payload []byte
}

// sheetState is what the store knows of one sheet, applied or in flight.
type sheetState struct {
	created  bool  // a create was applied
	creating bool  // a create is in flight
	inFlight int   // writes begun and not yet ended
	highest  int64 // the highest token any write of the sheet came with

	createKey    string
	createdToken int64
	lastToken    int64 // the token of the last applied write
	updates      int
	payloads     [][]byte
	applied      map[string]bool // keys of the clicks applied
}

// NewStore returns an empty store. A negative write duration is an error
// wrapping ErrInvalidConfig.
func NewStore(opts ...StoreOption) (*Store, error) {
	cfg := storeConfig{writeDuration: DefaultWriteDuration}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil StoreOption", ErrInvalidConfig)
		}
		o(&cfg)
	}
	if cfg.writeDuration < 0 {
		return nil, fmt.Errorf("%w: WithWriteDuration(%v): must be 0 or more", ErrInvalidConfig, cfg.writeDuration)
	}
	latency := cfg.latency
	if latency == nil {
		d := cfg.writeDuration
		latency = func(Op) time.Duration { return d }
	}
	return &Store{latency: latency, sheets: map[string]*sheetState{}}, nil
}

// Create creates sheet id, as the holder of token, for the create request
// key. It returns ErrSheetExists if the sheet was created by another request
// or is being created, ctx's error if ctx ends while the write is in flight
// (nothing is applied), or nil once the sheet exists (a replay of the
// sheet's own create included).
func (s *Store) Create(ctx context.Context, id string, token int64, key string) error {
	if key == "" {
		return fmt.Errorf("%w: create of sheet %q with no key", ErrInvalidWrite, id)
	}
	return s.write(ctx, OpCreate, id, token, []Click{{Key: key}})
}

// Update applies clicks (grouped into one update) to sheet id in one write,
// in order, as the holder of token; clicks whose key was applied before are
// skipped. It returns ErrNoSheet if the sheet has not been created, ctx's
// error if ctx ends while the write is in flight (nothing is applied), or
// nil once every click is applied.
func (s *Store) Update(ctx context.Context, id string, token int64, clicks []Click) error {
	if len(clicks) == 0 {
		return fmt.Errorf("%w: update of sheet %q with no clicks", ErrInvalidWrite, id)
	}
	for i, c := range clicks {
		if c.Key == "" {
			return fmt.Errorf("%w: update of sheet %q: click %d has no key", ErrInvalidWrite, id, i)
		}
	}
	return s.write(ctx, OpUpdate, id, token, clicks)
}

// write is a write's whole life: begin (checked, recorded), in flight for
// the write duration, end (applied unless ctx ended).
func (s *Store) write(ctx context.Context, kind OpKind, id string, token int64, clicks []Click) error {
	if id == "" || token < 1 {
		return fmt.Errorf("%w: %s of sheet %q with token %d: want a sheet id and a token of 1 or more", ErrInvalidWrite, kind, id, token)
	}
	op, err := s.begin(kind, id, token, clicks)
	if err != nil {
		return err
	}
	werr := inFlight(ctx, s.latency(op))
	s.end(op.Seq, werr)
	return werr
}

// begin records the write in the log, detects the violations it commits,
// and either refuses it (a create of a sheet that another request created,
// an update of a missing one) or puts it in flight. It returns the write as
// logged.
func (s *Store) begin(kind OpKind, id string, token int64, clicks []Click) (Op, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.sheets[id]
	if st == nil {
		st = &sheetState{applied: map[string]bool{}}
		s.sheets[id] = st
	}
	op := Op{Seq: int64(len(s.log) + 1), Kind: kind, Sheet: id, Token: token, Outcome: OpInFlight, Began: time.Now()}
	if kind == OpUpdate {
		op.Clicks = len(clicks)
	}
	flag := func(v ViolationKind, format string, args ...any) {
		op.Violations = append(op.Violations, v)
		s.violations = append(s.violations, Violation{Kind: v, Sheet: id, Op: op.Seq, Token: token, Detail: fmt.Sprintf(format, args...)})
	}
	if token < st.highest {
		flag(StaleToken, "the sheet has already seen token %d", st.highest)
	}
	if st.inFlight > 0 {
		flag(ConcurrentWriters, "%d other write(s) of the sheet were in flight", st.inFlight)
	}
	st.highest = max(st.highest, token)
	var refused error
	switch {
	case kind == OpCreate && st.created && st.createKey != clicks[0].Key:
		flag(DoubleCreate, "the sheet was already created, by request %s with token %d", st.createKey, st.createdToken)
		refused = fmt.Errorf("%w: sheet %q (created by request %s with token %d)", ErrSheetExists, id, st.createKey, st.createdToken)
	case kind == OpCreate && st.creating:
		flag(DoubleCreate, "another create of the sheet was in flight")
		refused = fmt.Errorf("%w: sheet %q is being created", ErrSheetExists, id)
	case kind == OpUpdate && !st.created:
		flag(UpdateBeforeCreate, "the sheet's create had not been applied")
		refused = fmt.Errorf("%w: sheet %q has not been created", ErrNoSheet, id)
	}
	if refused != nil {
		op.Outcome, op.Ended, op.Err = OpRefused, op.Began, refused.Error()
		s.log = append(s.log, op)
		return Op{}, refused
	}
	st.inFlight++
	if kind == OpCreate && !st.created {
		st.creating = true
	}
	s.log = append(s.log, op)
	s.log[len(s.log)-1].clicks = clicks
	return op, nil
}

// inFlight is a write's artificial duration d; it returns ctx's error if ctx
// ends first. The timer stands for the remote API's latency.
func inFlight(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sheets: write aborted: %w", err)
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sheets: write aborted: %w", ctx.Err())
	}
}

// end takes write seq out of flight and applies it unless err says it was
// aborted; what was applied before is skipped as a replay.
func (s *Store) end(seq int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	op := &s.log[seq-1]
	st := s.sheets[op.Sheet]
	st.inFlight--
	clicks := op.clicks
	op.clicks = nil
	if op.Kind == OpCreate && st.creating {
		st.creating = false
	}
	op.Ended = time.Now()
	if err != nil {
		op.Outcome, op.Err = OpAborted, err.Error()
		return
	}
	switch op.Kind {
	case OpCreate:
		if st.created {
			op.Outcome, op.Replayed = OpReplayed, 1
			return
		}
		st.created, st.createKey, st.createdToken = true, clicks[0].Key, op.Token
	case OpUpdate:
		applied := 0
		for _, c := range clicks {
			if st.applied[c.Key] {
				op.Replayed++
				continue
			}
			st.applied[c.Key] = true
			st.payloads = append(st.payloads, c.Payload)
			applied++
		}
		if applied == 0 {
			op.Outcome = OpReplayed
			return
		}
		st.updates++
	}
	op.Outcome = OpApplied
	st.lastToken = op.Token
}

// Sheet is a snapshot of one sheet, as applied.
type Sheet struct {
	ID           string
	CreatedToken int64    // the token of the write that created it
	LastToken    int64    // the token of the last applied write
	HighestToken int64    // the highest token any write of it came with
	Updates      int      // applied update writes
	Payloads     [][]byte // every click applied, in order
}

// Sheet returns a snapshot of sheet id, and false if it has not been
// created.
func (s *Store) Sheet(id string) (Sheet, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.sheets[id]
	if st == nil || !st.created {
		return Sheet{}, false
	}
	return Sheet{
		ID: id, CreatedToken: st.createdToken, LastToken: st.lastToken, HighestToken: st.highest,
		Updates: st.updates, Payloads: slices.Clone(st.payloads),
	}, true
}

// Log returns a copy of every write recorded so far, in the order they
// began.
func (s *Store) Log() []Op {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.log)
	for i := range out {
		out[i].clicks = nil
		out[i].Violations = slices.Clone(out[i].Violations)
	}
	return out
}

// Violations returns every violation detected so far, in the order the
// offending writes began.
func (s *Store) Violations() []Violation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.violations)
}

// Summary counts what the store has seen.
type Summary struct {
	Sheets     int // sheets created
	Creates    int // create writes applied
	Updates    int // update writes applied
	Clicks     int // clicks applied by them (replayed clicks not counted)
	Replayed   int // writes that found all or part of their work already applied
	Refused    int // writes refused (ErrSheetExists, ErrNoSheet)
	Aborted    int // writes whose context ended in flight
	InFlight   int // writes begun and not ended
	Violations map[ViolationKind]int
}

// Summary returns the store's counts. Every kind of violation has an entry,
// zero or not.
func (s *Store) Summary() Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := Summary{Violations: map[ViolationKind]int{}}
	for _, k := range violationKinds {
		sum.Violations[k] = 0
	}
	for _, v := range s.violations {
		sum.Violations[v.Kind]++
	}
	for _, st := range s.sheets {
		if st.created {
			sum.Sheets++
		}
		sum.InFlight += st.inFlight
	}
	for _, op := range s.log {
		switch {
		case op.Outcome == OpApplied && op.Kind == OpCreate:
			sum.Creates++
		case op.Outcome == OpApplied && op.Kind == OpUpdate:
			sum.Updates++
			sum.Clicks += op.Clicks - op.Replayed
		case op.Outcome == OpRefused:
			sum.Refused++
		case op.Outcome == OpAborted:
			sum.Aborted++
		}
		if op.Replayed > 0 {
			sum.Replayed++
		}
	}
	return sum
}

// SheetIDs returns the ids of the sheets created, sorted.
func (s *Store) SheetIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(s.sheets)) {
		if s.sheets[id].created {
			ids = append(ids, id)
		}
	}
	return ids
}
