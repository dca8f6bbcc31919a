//go:build go1.25

package queue

// The capture simulation: the real Capture.Run, readPartition, mapRecord,
// mayClaim and owns, of two or three instances with different leases,
// against a simulated checkpoint table and change stream (simCapStore),
// inside a testing/synctest bubble where time is virtual and the simulated
// Spanner's clock is the bubble's. Each schedule's choices (when the
// partitions split and merge, when changes commit, each instance's lease
// and batch size, pauses before and after a call, failed calls, calls whose
// outcome is unknown, crashes, stops and restarts) come from its seed.
// Checked after every claim and checkpoint, and at the end:
//   - a partition changes owner only once the lease its owner declared has
//     passed since its last claim or checkpoint, by Spanner's clock;
//   - the requests of one key are enqueued in commit order;
//   - at the end, every change committed is enqueued exactly once, and every
//     partition that ended is finished.
//   - no goroutine of a Run makes more Spanner calls in a virtual second
//     than its pace allows (capture_sim_effort_test.go), outages that cut
//     an instance off for up to 2.5 seconds included.
// A seed is one schedule: goroutines that wake at one virtual instant take
// turns in an order drawn from the seed (capSched), as in the Lock's
// simulation (doc/simulation.md, Replay; TestCaptureSimReplay).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmutex/spanmutex/internal/testutil"
)

const simCapStream = "SimStream"

// simCapPart is a partition of the simulated stream.
type simCapPart struct {
	end      time.Time              // zero: it does not end within the schedule
	children *childPartitionsRecord // at end
	records  []*dataChangeRecord    // in commit order
}

// simCapRow is a checkpoint row.
type simCapRow struct {
	state    string
	parents  []string
	start    time.Time
	resume   time.Time
	owner    spanner.NullString
	leasedAt spanner.NullTime
	declared spanner.NullInt64
}

// simCapChange is what the checker knows of one committed change: its key
// and commit timestamp, by its request id.
type simCapChange struct {
	key string
	at  time.Time
}

// simCapWorld is one schedule's simulated Spanner: the stream, the
// checkpoint table and the requests enqueued, and what the checker saw.
type simCapWorld struct {
	mu       sync.Mutex
	seed     uint64
	rng      *rand.Rand // the driver's draws; a store's calls draw from their own
	start    time.Time
	horizon  time.Time // no change commits after it
	roots    []string  // the initial query's partitions
	parts    map[string]*simCapPart
	rows     map[string]*simCapRow
	changes  map[string]simCapChange // every change committed, by request id
	enqueued map[string]int          // request id → times enqueued
	lastAt   map[string]time.Time    // key → commit timestamp of its last request
	leases   map[string]time.Duration
	faults   bool
	bad      []string
	trace    []string
	counts   simCapCounts
	sched    *capSched // nil: turns go at once (the scenarios)
	outages  []capOutage
}

// simCapCounts are what happened in schedules, to show that they explore.
type simCapCounts struct {
	changes, claims, takeovers, checkpoints, lostAnswers, lostPartitions, crashes, stops int
	// giveUps counts Runs that ended as an outage, a reader having met the
	// failure limit in a row (simCapStore.mayGiveUp).
	giveUps int
	// steps counts the simulated Spanner's calls applied (call's op run).
	steps int
	// maxEffort is the most calls a goroutine of a Run made in a virtual
	// second.
	maxEffort int
}

func (a *simCapCounts) add(b simCapCounts) {
	a.changes += b.changes
	a.claims += b.claims
	a.takeovers += b.takeovers
	a.checkpoints += b.checkpoints
	a.lostAnswers += b.lostAnswers
	a.lostPartitions += b.lostPartitions
	a.crashes += b.crashes
	a.stops += b.stops
	a.giveUps += b.giveUps
	a.steps += b.steps
	a.maxEffort = max(a.maxEffort, b.maxEffort)
}

func (w *simCapWorld) logf(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf("%8v ", time.Since(w.start).Round(time.Millisecond))+fmt.Sprintf(format, args...))
}

func (w *simCapWorld) violate(format string, args ...any) {
	w.logf("VIOLATION: "+format, args...)
	w.bad = append(w.bad, fmt.Sprintf(format, args...))
}

// between draws a duration uniformly from [lo, hi) (w.mu held).
func (w *simCapWorld) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)))
}

// emptySimCapWorld returns a world with no stream and no checkpoints,
// starting now, drawing from seed.
func emptySimCapWorld(seed uint64) *simCapWorld {
	return &simCapWorld{seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), start: time.Now(),
		parts: map[string]*simCapPart{}, rows: map[string]*simCapRow{}, changes: map[string]simCapChange{},
		enqueued: map[string]int{}, lastAt: map[string]time.Time{}, leases: map[string]time.Duration{}}
}

// newSimCapWorld draws a schedule's stream: root partitions A and B; A
// splits into C and D; D and B merge into F. Keys of class 0 move A→C, of
// class 1 A→D→F, of class 2 B→F, so that commit order per key crosses
// splits and merges.
func newSimCapWorld(seed uint64) *simCapWorld {
	w := emptySimCapWorld(seed)
	s := w.start.Add(time.Second)
	split := s.Add(w.between(time.Second, 4*time.Second))
	merge := split.Add(w.between(time.Second, 4*time.Second))
	w.horizon = merge.Add(w.between(2*time.Second, 5*time.Second))
	w.roots = []string{"A", "B"}
	for _, tok := range []string{"A", "B", "C", "D", "F"} {
		w.parts[tok] = &simCapPart{}
	}
	w.parts["A"].end = split
	w.parts["A"].children = &childPartitionsRecord{StartTimestamp: split, Children: []childPartition{{"C", []string{"A"}}, {"D", []string{"A"}}}}
	for _, tok := range []string{"B", "D"} {
		w.parts[tok].end = merge
		w.parts[tok].children = &childPartitionsRecord{StartTimestamp: merge, Children: []childPartition{{"F", []string{"B", "D"}}}}
	}
	route := func(class int, at time.Time) string {
		switch {
		case class == 2 && at.Before(merge):
			return "B"
		case class == 2:
			return "F"
		case at.Before(split):
			return "A"
		case class == 0:
			return "C"
		case at.Before(merge):
			return "D"
		}
		return "F"
	}
	n := 20 + w.rng.IntN(40)
	ats := make([]time.Time, n)
	for i := range ats {
		ats[i] = s.Add(time.Duration(w.rng.Int64N(int64(w.horizon.Sub(s)))).Truncate(time.Microsecond) + time.Microsecond)
	}
	slices.SortFunc(ats, func(a, b time.Time) int { return a.Compare(b) })
	for i, at := range ats {
		class := w.rng.IntN(3)
		key := fmt.Sprintf("k%d-%d", class, w.rng.IntN(2))
		d := &dataChangeRecord{CommitTimestamp: at, RecordSequence: "00000000", ServerTransactionID: "tx" + strconv.Itoa(i),
			TableName: "Orders", ModType: string(ModUpdate), Mods: []csMod{{Keys: fmt.Sprintf(`{"OrderID":%q}`, key)}}}
		p := w.parts[route(class, at)]
		p.records = append(p.records, d)
		w.changes[CaptureRequestID(d.changes(simCapStream)[0], 0)] = simCapChange{key, at}
	}
	return w
}

// simCapMapper makes one update request per change, for the changed key.
func simCapMapper(ch Change) ([]Request, error) {
	var keys struct{ OrderID string }
	if err := json.Unmarshal([]byte(ch.Keys), &keys); err != nil {
		return nil, err
	}
	return []Request{{Kind: KindUpdate, Resource: keys.OrderID}}, nil
}

// simCapStore is one instance's view of the world: a captureStore whose
// calls meet the schedule's faults.
type simCapStore struct {
	w      *simCapWorld
	c      *Capture
	life   int                   // which start of the instance this is
	rngs   map[string]*rand.Rand // per goroutine of Run: "run", or a partition's reader (w.mu)
	effort map[string]*capEffort // per goroutine of Run (w.mu; capture_sim_effort_test.go)
	// unacked counts, per goroutine, the failures the world made its
	// calls meet: a partition reader's since its last checkpoint was
	// acknowledged (w.mu). Run may end as an outage only once they reach
	// the failure limit (mayGiveUp).
	unacked map[string]int
	crashed atomic.Bool
}

// fail counts a failure the world made a call of goroutine meet (w.mu
// held).
func (s *simCapStore) fail(goroutine string) { s.unacked[goroutine]++ }

// mayGiveUp reports whether err, which ended a Run, is the give-up of a
// loop that met at least DefaultCaptureMaxFailures failures (w.mu held): a
// partition reader since its last acknowledged checkpoint, Run's own loops
// ("run": starting, listing and claiming) in the whole life. The library
// counts failed windows or passes, and starts again after one that
// succeeds, so it can only count fewer: a loop that gives up sooner is a
// violation. Failures of unknown outcome (a checkpoint applied with its
// answer lost) count, as they do for the library: it cannot tell.
func (s *simCapStore) mayGiveUp(err error) bool {
	var o *captureOutageError
	if !errors.As(err, &o) {
		return false
	}
	for g, n := range s.unacked {
		loop := g == "run" && (o.what == "starting" || o.what == "listing and claiming partitions")
		if (loop || o.what == "reading partition "+shortToken(g)) && n >= DefaultCaptureMaxFailures {
			return true
		}
	}
	return false
}

// draws returns the source of the calls of one goroutine of the instance's
// Run (w.mu held): drawn from the seed, the instance, its start and the
// goroutine, so that goroutines racing at one virtual instant do not take
// one another's draws.
func (s *simCapStore) draws(goroutine string) *rand.Rand {
	r := s.rngs[goroutine]
	if r == nil {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%d/%s", s.c.cfg.owner, s.life, goroutine)
		r = rand.New(rand.NewPCG(s.w.seed, h.Sum64()))
		s.rngs[goroutine] = r
	}
	return r
}

// chanceOf draws true with probability p from r, when faults are on (w.mu
// held).
func (w *simCapWorld) chanceOf(r *rand.Rand, p float64) bool { return w.faults && r.Float64() < p }

var errSimUnavailable = status.Error(codes.Unavailable, "simulated: unavailable")

// call runs op as one Spanner call of this instance, made by goroutine: possibly after a
// pause, possibly failing before it reaches Spanner, possibly applied with
// its answer lost, possibly answered only after a pause. A crashed
// instance's calls fail.
func (s *simCapStore) call(ctx context.Context, what, goroutine string, op func(now time.Time) error) error {
	w := s.w
	// The call's turns, keyed by the instance's life, the goroutine, what
	// and the instant it began: it starts (its goroutine may have been
	// woken by a timer of Run), a pause before or after it ends.
	start := time.Now().UnixNano()
	turn := func(step string) { w.sched.turn(s.key(goroutine, what+step, start)) }
	turn("")
	if s.crashed.Load() {
		return errSimUnavailable
	}
	if err := ctx.Err(); err != nil {
		// A call whose ctx has ended fails at once, drawing nothing: Run's
		// select may meet its ctx's end and a partition's result at once,
		// and pick either at random (the runtime's choice, not the
		// seed's); a call it then makes must not move its draws on.
		return status.FromContextError(err).Err()
	}
	w.mu.Lock()
	if !s.reaches(goroutine) {
		s.fail(goroutine)
		w.mu.Unlock()
		return errSimUnavailable
	}
	r, lease := s.draws(goroutine), int64(2*s.c.cfg.lease)
	pauseBefore := w.chanceOf(r, 0.04)
	failBefore := w.chanceOf(r, 0.03)
	lost := w.chanceOf(r, 0.03)
	pauseAfter := w.chanceOf(r, 0.04)
	pb, pa := time.Duration(r.Int64N(lease)), time.Duration(r.Int64N(lease))
	w.mu.Unlock()
	if pauseBefore {
		time.Sleep(pb) // the process is paused: it does not see ctx either
		turn("/resumed")
	}
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	w.mu.Lock()
	if failBefore || s.crashed.Load() {
		s.fail(goroutine)
		w.mu.Unlock()
		return errSimUnavailable
	}
	err := op(time.Now())
	w.counts.steps++
	if err == nil && lost {
		w.logf("%s %s: applied, answer lost", s.c.cfg.owner, what)
		w.counts.lostAnswers++
		s.fail(goroutine)
		err = errSimUnavailable
	}
	w.mu.Unlock()
	if pauseAfter {
		time.Sleep(pa)
		turn("/answered")
	}
	return err
}

// key is the key of a turn of this instance's goroutine.
func (s *simCapStore) key(goroutine, what string, at int64) capKey {
	return capKey{fmt.Sprintf("%s/%d/%s", s.c.cfg.owner, s.life, goroutine), what, at}
}

func (s *simCapStore) ensureRoot(ctx context.Context) error {
	return s.call(ctx, "ensureRoot", "run", func(now time.Time) error {
		if s.w.rows[rootToken] != nil {
			return nil
		}
		s.w.rows[rootToken] = &simCapRow{state: partitionFinished, start: s.w.start}
		for _, tok := range s.w.roots {
			s.w.rows[tok] = &simCapRow{state: partitionCreated, parents: []string{}, start: s.w.start, resume: s.w.start}
		}
		return nil
	})
}

func (s *simCapStore) spannerNow(ctx context.Context, who string) (time.Time, error) {
	var now time.Time
	err := s.call(ctx, "spannerNow", who, func(t time.Time) error { now = t; return nil })
	return now, err
}

func (r *simCapRow) holder(now time.Time) partitionHolder {
	return partitionHolder{owner: r.owner, leasedAt: r.leasedAt, declared: r.declared, now: now}
}

func (r *simCapRow) partition(token string) capturePartition {
	return capturePartition{token: token, parents: slices.Clone(r.parents), start: r.start, resume: r.resume}
}

func (s *simCapStore) runnable(ctx context.Context) ([]capturePartition, error) {
	var out []capturePartition
	err := s.call(ctx, "runnable", "run", func(now time.Time) error {
		out = nil
		for tok, r := range s.w.rows {
			if tok == rootToken || r.state == partitionFinished || !s.c.mayClaim(r.holder(now)) {
				continue
			}
			finished := 0
			for _, p := range r.parents {
				if pr := s.w.rows[p]; pr != nil && pr.state == partitionFinished {
					finished++
				}
			}
			if finished == len(r.parents) {
				out = append(out, r.partition(tok))
			}
		}
		slices.SortFunc(out, func(a, b capturePartition) int { return strings.Compare(a.token, b.token) })
		return nil
	})
	return out, err
}

func (s *simCapStore) claim(ctx context.Context, token string) (capturePartition, bool, error) {
	var (
		p       capturePartition
		claimed bool
	)
	me := s.c.cfg.owner
	err := s.call(ctx, "claim "+token, "run", func(now time.Time) error {
		r := s.w.rows[token]
		claimed = false
		if r == nil || r.state == partitionFinished || !s.c.mayClaim(r.holder(now)) {
			return nil
		}
		if r.owner.Valid && r.owner.StringVal != me && r.leasedAt.Valid {
			prev := r.owner.StringVal
			if silent := now.Sub(r.leasedAt.Time); silent < s.w.leases[prev] {
				s.w.violate("%s took %s from %s after %v without a checkpoint; %s declared %v", me, token, prev, silent, prev, s.w.leases[prev])
			}
			s.w.logf("%s takes %s over from %s", me, token, prev)
			s.w.counts.takeovers++
		}
		r.state, r.owner = partitionRunning, spanner.NullString{StringVal: me, Valid: true}
		r.leasedAt = spanner.NullTime{Time: now, Valid: true}
		r.declared = spanner.NullInt64{Int64: s.c.cfg.lease.Microseconds(), Valid: true}
		p, claimed = r.partition(token), true
		s.w.counts.claims++
		s.w.logf("%s claims %s at resume %v", me, token, r.resume.Sub(s.w.start))
		return nil
	})
	if err != nil {
		return capturePartition{}, false, err
	}
	return p, claimed, nil
}

func (s *simCapStore) commit(ctx context.Context, cp captureCheckpoint) (int, error) {
	added := 0
	me := s.c.cfg.owner
	err := s.call(ctx, "commit "+cp.token, cp.token, func(now time.Time) error {
		w := s.w
		r := w.rows[cp.token]
		if r == nil || !s.c.owns(r.state, r.owner) {
			w.counts.lostPartitions++
			return errPartitionLost
		}
		w.counts.checkpoints++
		added = 0
		for _, req := range cp.reqs {
			if w.enqueued[req.ID]++; w.enqueued[req.ID] > 1 {
				continue
			}
			added++
			ch, ok := w.changes[req.ID]
			if !ok {
				w.violate("%s enqueued request %s of no committed change", me, req.ID)
				continue
			}
			if ch.at.Before(w.lastAt[ch.key]) {
				w.violate("key %s: the change of %v enqueued after one of %v", ch.key, ch.at.Sub(w.start), w.lastAt[ch.key].Sub(w.start))
			}
			w.lastAt[ch.key] = ch.at
		}
		r.resume = csMaxTime(r.resume, cp.resume)
		r.leasedAt = spanner.NullTime{Time: now, Valid: true}
		r.declared = spanner.NullInt64{Int64: s.c.cfg.lease.Microseconds(), Valid: true}
		if cp.finish != nil {
			r.state, r.owner = partitionFinished, spanner.NullString{}
			for _, ch := range cp.finish.Children {
				if k := w.rows[ch.Token]; k != nil {
					k.parents = normalizeParents(append(k.parents, ch.Parents...))
					continue
				}
				start := cp.finish.StartTimestamp
				w.rows[ch.Token] = &simCapRow{state: partitionCreated, parents: normalizeParents(ch.Parents), start: start, resume: start}
			}
		}
		w.logf("%s checkpoints %s: resume %v, %d requests (%d new)%s", me, cp.token, r.resume.Sub(w.start), len(cp.reqs), added,
			map[bool]string{true: ", finished"}[cp.finish != nil])
		return nil
	})
	if err == nil {
		s.w.mu.Lock()
		s.unacked[cp.token] = 0
		s.w.mu.Unlock()
	}
	return added, err
}

func (s *simCapStore) release(ctx context.Context) {
	if s.crashed.Load() {
		return
	}
	_ = s.call(ctx, "release", "run", func(time.Time) error {
		for _, r := range s.w.rows {
			if r.state != partitionFinished && r.owner.StringVal == s.c.cfg.owner {
				r.owner = spanner.NullString{}
			}
		}
		return nil
	})
}

// query returns the partition's changes from start to end, each once its
// commit timestamp has passed, then its child partitions record if it
// ends within the window. It may fail before it starts or part-way.
func (s *simCapStore) query(ctx context.Context, start time.Time, end *time.Time, token *string, fn func(csRecord) error) error {
	w := s.w
	p := w.parts[*token]
	limit := *end
	ends := !p.end.IsZero() && !p.end.After(limit)
	if ends {
		limit = p.end
	}
	w.mu.Lock()
	if !s.reaches(*token) {
		s.fail(*token)
		w.mu.Unlock()
		return errSimUnavailable
	}
	failAt := -1
	if r := s.draws(*token); w.chanceOf(r, 0.05) {
		failAt = r.IntN(len(p.records) + 1)
	}
	w.mu.Unlock()
	wait := func(until time.Time) error {
		defer w.sched.turn(s.key(*token, "query", until.UnixNano()))
		if err := ctx.Err(); err != nil {
			// Ended already (cut short, or stopped): not a select between
			// it and a timer that fires at once, which picks either.
			return status.FromContextError(err).Err()
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-time.After(time.Until(until)):
			return nil
		}
	}
	for i, d := range p.records {
		if i == failAt || s.crashed.Load() {
			w.mu.Lock()
			s.fail(*token)
			w.mu.Unlock()
			return errSimUnavailable
		}
		if d.CommitTimestamp.Before(start) || d.CommitTimestamp.After(limit) || (ends && !d.CommitTimestamp.Before(p.end)) {
			continue
		}
		if err := wait(d.CommitTimestamp); err != nil {
			return err
		}
		if err := fn(csRecord{Data: d}); err != nil {
			return err
		}
	}
	if err := wait(limit); err != nil {
		return err
	}
	if ends {
		return fn(csRecord{Children: p.children})
	}
	return nil
}

// simCapInstance is one capture process of the schedule.
type simCapInstance struct {
	id     string
	lives  int // how many times it started
	lease  time.Duration
	store  *simCapStore
	cancel context.CancelFunc
	done   chan error
}

func (w *simCapWorld) startInstance(in *simCapInstance) {
	in.store = w.newStore(in)
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel, in.done = cancel, make(chan error, 1)
	go func() { in.done <- in.store.c.Run(ctx) }()
}

// newStore makes the next life of instance in: a Capture whose store is
// the world's.
func (w *simCapWorld) newStore(in *simCapInstance) *simCapStore {
	w.mu.Lock()
	defer w.mu.Unlock()
	batch := 1 + w.rng.IntN(8)
	w.logf("%s starts (lease %v, batch %d)", in.id, in.lease, batch)
	c := &Capture{q: &Queue{cfg: config{maxPayload: DefaultMaxPayload}}, stream: simCapStream, mapper: simCapMapper,
		cfg: captureConfig{table: "SimCheckpoints", window: 100 * time.Millisecond, heartbeat: time.Second, lease: in.lease,
			poll: 100 * time.Millisecond, batch: batch, owner: in.id, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	in.lives++
	st := &simCapStore{w: w, c: c, life: in.lives, rngs: map[string]*rand.Rand{}, effort: map[string]*capEffort{},
		unacked: map[string]int{}}
	c.store = st
	c.cfg.afterFunc = func(what string, d time.Duration, f func()) func() bool {
		at := time.Now().Add(d).UnixNano()
		return time.AfterFunc(d, func() { w.sched.turn(st.key(what, "cut", at)); f() }).Stop
	}
	c.cfg.backOff = func(what string) backoff.BackOff {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%d/%s", in.id, st.life, what)
		return &simCapBackOff{r: rand.New(rand.NewPCG(w.seed, h.Sum64()))}
	}
	return st
}

// simCapBackOff is the shape of newAttempts's backoff (from captureInitial-
// BackOff, times 1.6 up to captureMaxBackOff, randomised by half), its
// draws from the seed, the Capture, its life and the loop: the library's
// draws from the global source, which no seed fixes.
type simCapBackOff struct {
	r   *rand.Rand
	cur time.Duration
}

func (b *simCapBackOff) Reset() { b.cur = 0 }

func (b *simCapBackOff) NextBackOff() time.Duration {
	if b.cur == 0 {
		b.cur = captureInitialBackOff
	}
	d := time.Duration(float64(b.cur) * (0.5 + b.r.Float64()))
	b.cur = min(time.Duration(float64(b.cur)*1.6), captureMaxBackOff)
	return d
}

// stopInstance ends the instance's Run: crashed, it gives nothing back.
func (w *simCapWorld) stopInstance(in *simCapInstance, crash bool) {
	w.mu.Lock()
	w.logf("%s %s", in.id, map[bool]string{true: "crashes", false: "stops"}[crash])
	if crash {
		w.counts.crashes++
	} else {
		w.counts.stops++
	}
	w.mu.Unlock()
	in.store.crashed.Store(crash)
	in.cancel()
	err := <-in.done
	// Run returned while goroutines of the instance it woke may still run
	// (a release in flight): the driver goes on in a turn of its own.
	w.sched.turn(capKey{"driver", "stopped " + in.id, time.Now().UnixNano()})
	in.done = nil
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case errors.Is(err, context.Canceled):
	case in.store.mayGiveUp(err):
		w.logf("%s had given up: %v", in.id, err)
		w.counts.giveUps++
	default:
		w.violate("%s: Run returned %v, not its ctx's error", in.id, err)
	}
}

// runCapSchedule runs one schedule and returns its violations, trace and
// counts.
func runCapSchedule(seed uint64) (bad, trace []string, counts simCapCounts) {
	w := newSimCapWorld(seed)
	w.sched = newCapSched(seed)
	defer w.sched.stop()
	w.counts.changes = len(w.changes)
	leases := []time.Duration{1200 * time.Millisecond, 2 * time.Second, 4 * time.Second}
	var ins []*simCapInstance
	for i := range 2 + w.rng.IntN(2) {
		in := &simCapInstance{id: fmt.Sprintf("i%d", i), lease: leases[w.rng.IntN(len(leases))]}
		w.leases[in.id] = in.lease
		ins = append(ins, in)
	}
	ids := make([]string, len(ins))
	for i, in := range ins {
		ids[i] = in.id
	}
	w.drawOutages(ids)
	w.faults = true
	for _, in := range ins {
		w.startInstance(in)
	}
	for time.Now().Before(w.horizon) {
		w.mu.Lock()
		step := w.between(200*time.Millisecond, 2*time.Second)
		in, act := ins[w.rng.IntN(len(ins))], w.rng.IntN(4)
		w.mu.Unlock()
		time.Sleep(step)
		w.sched.turn(capKey{"driver", "step", time.Now().UnixNano()})
		switch {
		case in.done == nil && act < 3:
			w.startInstance(in)
		case in.done != nil && act == 0:
			w.stopInstance(in, true)
		case in.done != nil && act == 1:
			w.stopInstance(in, false)
		}
	}
	w.mu.Lock()
	w.faults = false
	w.logf("faults end")
	w.mu.Unlock()
	for _, in := range ins {
		if in.done == nil { // stopped or crashed
			w.startInstance(in)
		}
	}
	deadline := w.horizon.Add(30 * time.Second)
	for !w.caughtUp() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		w.sched.turn(capKey{"driver", "poll", time.Now().UnixNano()})
	}
	for _, in := range ins {
		w.stopInstance(in, false)
	}
	w.sched.mu.Lock()
	turns, ties := w.sched.turns, w.sched.ties
	w.sched.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if ties > 0 {
		w.logf("%d of %d turns tied", ties, turns)
	}
	w.checkEnd()
	return w.bad, w.trace, w.counts
}

// outstanding returns how many changes were never enqueued and which
// partitions ended but are not finished (w.mu held).
func (w *simCapWorld) outstanding() (lost int, open []string) {
	for id := range w.changes {
		if w.enqueued[id] == 0 {
			lost++
		}
	}
	for tok, p := range w.parts {
		if r := w.rows[tok]; !p.end.IsZero() && (r == nil || r.state != partitionFinished) {
			open = append(open, tok)
		}
	}
	return lost, open
}

// caughtUp reports whether every change has been enqueued and every
// partition that ended is finished.
func (w *simCapWorld) caughtUp() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	lost, open := w.outstanding()
	return lost == 0 && len(open) == 0
}

// checkEnd checks that every change was enqueued and every partition that
// ended is finished (w.mu held).
func (w *simCapWorld) checkEnd() {
	lost, open := w.outstanding()
	if lost > 0 {
		w.violate("%d of %d changes never enqueued, 30s after the last commit", lost, len(w.changes))
	}
	for _, tok := range open {
		w.violate("partition %s ended at %v but is not finished", tok, w.parts[tok].end.Sub(w.start))
	}
}

// capSimSeeds returns the seeds TestCaptureSimulation runs:
// SPANMUTEX_SIM_CAPTURE_SEEDS=A-B, or SPANMUTEX_SIM_CAPTURE_SCHEDULES from 1
// (default 2,000, or 200,000 with SPANMUTEX_SOAK=1).
func capSimSeeds(t *testing.T) testutil.Seeds {
	return testutil.SeedRange(t, "SPANMUTEX_SIM_CAPTURE", 2_000, 200_000)
}

// capSimRegressions returns the seeds that once found a violation. 3, 4
// and 7: Run returned the Unavailable of its first checkpoint-table read
// instead of retrying it (Capture.begin retries now). 7204: a pause while
// Run read Spanner's clock made its skew, and so every query, a pause
// longer, and partitions changed hands before their first checkpoint
// forever (Capture.skewOnce). Both were found before each goroutine drew
// from a source of its own, which changed every schedule since.
//
// 10, 11 and 12: issue 41's fault 9 put back (a failed call retried at
// once, never counted), each breaks the effort bound in an outage
// (capture_sim_effort_test.go).
//
// 42834412210209 (CI's soak): an outage, then three checkpoints of one
// partition applied with their answers lost, made its reader meet the
// failure limit and Run end with ErrOutage, as documented; the checker
// had counted every such end a violation (simCapStore.mayGiveUp).
func capSimRegressions() []uint64 { return []uint64{3, 4, 7, 7204, 10, 11, 12, 42834412210209} }

// slowClockStore answers spannerNow after a pause the first time only.
type slowClockStore struct {
	captureStore
	pause time.Duration
	calls int
}

func (s *slowClockStore) spannerNow(context.Context, string) (time.Time, error) {
	s.calls++
	if s.calls == 1 {
		time.Sleep(s.pause)
	}
	return time.Now(), nil
}

// A pause while Run reads Spanner's clock does not become the skew that
// sets every query's end: the reading is taken again.
func TestCaptureSkewIgnoresAPausedClockRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &slowClockStore{pause: 8 * time.Second}
		c := &Capture{cfg: captureConfig{window: 100 * time.Millisecond}, store: st}
		skew, err := c.skewOnce(context.Background(), "run")
		require.NoError(t, err)
		require.Equal(t, 2, st.calls, "a round trip longer than a window is measured again")
		require.Zero(t, skew, "one clock in the bubble: no skew, not the pause")
	})
}

func TestCaptureSimulation(t *testing.T) {
	rng := capSimSeeds(t)
	failed, ran, covered := 0, 0, int64(0)
	var total simCapCounts
	regressions := capSimRegressions()
	next := rng.First // the next seed of the range, after the regressions
	for i := 0; ; i++ {
		seed := next
		if i < len(regressions) {
			seed = regressions[i]
		} else if !rng.Runs(seed) {
			break
		} else {
			next, covered = next+1, covered+1
		}
		ran++
		var (
			bad, trace []string
			counts     simCapCounts
		)
		synctest.Test(t, func(t *testing.T) { bad, trace, counts = runCapSchedule(seed) })
		total.add(counts)
		if len(bad) > 0 {
			failed++
			if len(trace) > 60 {
				trace = trace[len(trace)-60:]
			}
			t.Errorf("seed %d: %s\n%s\n  replay: SPANMUTEX_SIM_CAPTURE_SEEDS=%d go test -count=1 -short -v -run '^TestCaptureSimulation$' ./queue",
				seed, strings.Join(bad, "; "), strings.Join(trace, "\n"), seed)
			if failed >= 3 {
				break
			}
		}
	}
	t.Logf("capture simulation: %d schedules, %d with violations (seeds %s and %d regression seeds); %+v",
		ran, failed, rng.Covered(covered), len(regressions), total)
	require.Positive(t, total.takeovers, "no schedule took a partition over")
	require.Positive(t, total.lostPartitions, "no schedule fenced a checkpoint off")
}

// TestCaptureSimReplay runs seeds 1-200 of the capture simulation
// (SPANMUTEX_SIM_REPLAY=N: N seeds) twice each, and requires each replay to
// have the same trace, line for line (hashed), the same step count and the
// same counts: a seed is one schedule (doc/simulation.md, Replay).
func TestCaptureSimReplay(t *testing.T) {
	n := uint64(200)
	if s := os.Getenv("SPANMUTEX_SIM_REPLAY"); s != "" {
		if _, err := fmt.Sscan(s, &n); err != nil {
			t.Fatalf("SPANMUTEX_SIM_REPLAY=%q: want a count", s)
		}
	}
	type run struct {
		hash   uint64
		trace  []string
		counts simCapCounts
	}
	once := func(seed uint64) (r run) {
		synctest.Test(t, func(t *testing.T) { _, r.trace, r.counts = runCapSchedule(seed) })
		h := fnv.New64a()
		for _, l := range r.trace {
			h.Write([]byte(l))
			h.Write([]byte{'\n'})
		}
		r.hash = h.Sum64()
		return r
	}
	same, steps, digest := 0, 0, fnv.New64a()
	for seed := uint64(1); seed <= n; seed++ {
		a, b := once(seed), once(seed)
		fmt.Fprintf(digest, "%d %x %+v\n", seed, a.hash, a.counts)
		steps += a.counts.steps
		if a.hash == b.hash && a.counts == b.counts {
			same++
			continue
		}
		t.Errorf("capture seed %d does not replay: trace hash %x (%d lines), %+v; then %x (%d lines), %+v",
			seed, a.hash, len(a.trace), a.counts, b.hash, len(b.trace), b.counts)
		for i := range min(len(a.trace), len(b.trace)) {
			if a.trace[i] != b.trace[i] {
				t.Logf("  first difference at line %d, after\n    %s\n  first:\n    %s\n  then:\n    %s", i,
					strings.Join(a.trace[max(0, i-4):i], "\n    "), strings.Join(a.trace[i:min(len(a.trace), i+3)], "\n    "), strings.Join(b.trace[i:min(len(b.trace), i+3)], "\n    "))
				break
			}
		}
	}
	t.Logf("capture: %d of %d schedules replayed exactly (trace hash, counts and step count); %d steps, digest %x", same, n, steps, digest.Sum64())
}
