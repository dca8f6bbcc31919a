package spanmutex

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"
	"github.com/spanmutex/spanmutex/internal/spanerr"
)

// Mutex is a named run-once critical section backed by one row of a Cloud
// Spanner table. Create it with New. A Mutex is safe for concurrent use; each
// Run call is an independent contender with its own acquisition id. A Mutex
// not made by New (its zero value, or nil) does nothing: Run and Reset
// return an error wrapping ErrInvalidConfig, Name and Owner "".
type Mutex struct {
	name          string
	cfg           config
	store         mutexStore
	schemaChecked atomic.Bool
}

// New returns a Mutex for the critical section name, stored in client's
// database. It validates every input and option and does no I/O: problems
// with the table are reported by the first Run. Every error it returns wraps
// ErrInvalidConfig.
func New(client *spanner.Client, name string, opts ...MutexOption) (*Mutex, error) {
	if client == nil {
		return nil, errNilClient("New")
	}
	m, err := newMutex(name, opts)
	if err != nil {
		return nil, err
	}
	st := m.cfg.newStore(client)
	st.sender = m.cfg.scope
	st.versioned = m.cfg.version != ""
	m.store = st
	return m, nil
}

// newMutex returns a Mutex named name with opts applied and no store yet
// (New adds one on Spanner, tests their own).
func newMutex(name string, opts []MutexOption) (*Mutex, error) {
	cfg, err := configure(name, opts) // configure.go
	if err != nil {
		return nil, err
	}
	return &Mutex{name: name, cfg: cfg}, nil
}

// unreached adds to err, if no Spanner call has succeeded yet, that Spanner
// may be unreachable.
func (m *Mutex) unreached(ctx context.Context, err error, began time.Time) error {
	if st, ok := m.store.(*spannerStore); ok {
		return st.unreached(ctx, err, began)
	}
	return err
}

// Run runs fn as the critical section at most once across every process that
// runs the same name against the same table, and returns how it ended:
//
//   - NotNeeded, nil: the Needed callback said there is nothing to do.
//   - AlreadyDone, nil: another holder completed it (now or earlier).
//   - Executed, nil: fn ran here, returned nil, and the row is DONE.
//   - Executed, *SectionError: fn ran here and failed; the row is FAILED with
//     its text and another contender may retry while attempts remain.
//   - Executed, *InterruptedError: fn ran here and returned one (see
//     Interrupt): it was stopped from outside, and the row was given back,
//     NEEDED with the attempt not counted, for another contender to run.
//   - Executed, ErrLeaseLost: fn ran here and returned, but the row had
//     been taken over meanwhile (its renewals did not reach Spanner for a
//     lease, or it was recorded abandoned).
//   - NoOutcome, ErrAttemptsExhausted: the section failed on its last allowed
//     attempt; fn did not run here.
//   - NoOutcome, ErrOutage: Spanner kept failing (MaxFailures calls in
//     a row); fn did not run here, and its attempts were not touched.
//   - NoOutcome, errors.Join(ErrNotObtained, ctx.Err()): ctx ended while
//     waiting; fn did not run here.
//
// When Run returns, the lease given to fn has ended: its Done is closed and
// its Err matches ErrReleased (or ErrLeaseLost, if it was lost).
//
// fn runs only after the commit that made this call the holder was
// acknowledged by Spanner (or, if its outcome was unknown, read back). fn's
// ctx is cancelled when Run's ctx is. While another holder runs the section,
// Run waits with lock-free reads and takes over only once the holder has
// gone without renewing for the lease it declared, plus jitter, by
// Spanner's clock.
func (m *Mutex) Run(ctx context.Context, fn func(ctx context.Context, lease *Lease) error) (outcome Outcome, err error) {
	if ctx == nil {
		return NoOutcome, errNilContext
	}
	if m == nil || m.store == nil {
		return NoOutcome, errNotMade("Mutex", "New")
	}
	began := time.Now()
	ctx, run := m.cfg.tel.start(ctx, "spanmutex.Run", "run") // telemetry.go
	defer func() { run.ended(outcome, err) }()
	if fn == nil {
		return NoOutcome, fmt.Errorf("spanmutex: Run(%q): nil section function", m.name)
	}
	if m.cfg.needed != nil {
		needed, err := m.cfg.needed(ctx)
		if err != nil {
			return NoOutcome, fmt.Errorf("spanmutex: section %q: Needed callback: %w", m.name, err)
		}
		if !needed {
			m.cfg.logger.Debug("not needed")
			return NotNeeded, nil
		}
	}
	actx, acq := m.cfg.tel.start(ctx, "spanmutex.acquire", "run") // telemetry.go
	if err := m.checkSchema(actx); err != nil {
		err = m.unreached(ctx, notObtained(ctx, err), began)
		acq.acquired(nil, runOutcome(err, NoOutcome), err)
		return NoOutcome, err
	}
	lease, outcome, err := m.grant(actx)
	if lease == nil {
		err = m.unreached(ctx, notObtained(ctx, err), began)
		acq.acquired(nil, runOutcome(err, outcome), err)
		return outcome, err
	}
	acq.acquired(lease, runOutcome(nil, outcome), nil)
	return m.runHeld(ctx, lease, fn)
}

// grant obtains the section and applies the grant rule to the lease
// (freshen, or its session's admit: grantRule): one taken over before the
// section could begin (this process was paused, say) sends us back to
// obtain, where the row now says who holds it or that the section is
// done; one whose renewal fails, or whose session was lost, is given
// back, and obtained again after a backoff if the failure is transient.
// Those failures are counted across the whole call, not per obtain, so
// that renewals that always fail end Run with ErrOutage after
// WithMaxFailures of them rather than acquiring and giving back forever.
func (m *Mutex) grant(ctx context.Context) (*Lease, Outcome, error) {
	renewals := m.cfg.newAttempts(m.name, 1)[0]
	rs := m.session(ctx) // nil without sessions (mutex_session.go)
	defer rs.pause()
	for {
		lease, outcome, err := m.obtain(ctx, rs)
		if lease == nil {
			return nil, outcome, err
		}
		err = m.grantRule(ctx, rs, lease)
		switch {
		case err == nil:
			return lease, outcome, nil
		case errors.Is(err, ErrLeaseLost):
			m.cfg.logger.Info("the section was taken over before it could begin; reading the row again", "token", lease.token)
			continue
		}
		m.giveBack(ctx, lease)
		if err := renewals.failed(ctx, err, 0); err != nil {
			return nil, NoOutcome, err
		}
	}
}

// checkSchema checks the table once per Mutex, so that a missing table or
// column is reported by name before anything is written.
func (m *Mutex) checkSchema(ctx context.Context) error {
	if m.schemaChecked.Load() {
		return nil
	}
	// Transient errors are retried like failed reads: MaxFailures in a row.
	tries := m.cfg.newAttempts(m.name, 1)[0]
	for {
		err := m.store.checkSchema(ctx)
		if err == nil {
			m.schemaChecked.Store(true)
			return nil
		}
		if !spanerr.Transient(err) {
			return err
		}
		if err := tries.failed(ctx, err, 0); err != nil {
			return err
		}
	}
}

// obtainer is one Run call's loop until it holds the section or knows how
// Run ends without running it.
type obtainer struct {
	m   *Mutex
	pol policy
	// reads and acquires count failed Spanner calls in a row.
	reads, acquires *attempts
	// unresolved holds the ids of acquisitions whose commit outcome is
	// unknown, with the local time each was sent and whether it was a
	// takeover. If a later read finds the row STARTED under one of them,
	// that commit did happen and the section is ours; if Run ends first,
	// they are settled and given back.
	unresolved map[string]pendingAcquisition
	// watcher is this Run's registration for a wake-up when the section
	// ends (mutex_watch.go), if any.
	watcher *watcher
	// sess is the Run's use of its Scope's session, nil without one
	// (mutex_session.go): its acquisitions name the session.
	sess *runSession
}

// obtain loops until this call holds the section (lease non-nil) or knows
// how Run ends without running it; its acquisitions name rs's session
// (none if rs is nil).
func (m *Mutex) obtain(ctx context.Context, rs *runSession) (*Lease, Outcome, error) {
	att := m.cfg.newAttempts(m.name, 2)
	o := &obtainer{m: m, sess: rs, reads: att[0], acquires: att[1], unresolved: map[string]pendingAcquisition{},
		pol: policy{lease: m.cfg.lease, staleness: m.cfg.staleness, jitter: m.cfg.drawFraction(m.cfg.jitter),
			maxAttempts: int64(m.cfg.maxAttempts), version: m.cfg.version}}
	for {
		lease, outcome, err, done := o.step(ctx)
		if done {
			// Acquisitions of unknown outcome that turn out to have landed
			// are given back, so that nobody waits for a holder that left.
			m.settle(ctx, o.unresolved)
			o.unwatch(ctx)
			return lease, outcome, err
		}
	}
}

// step reads the row once and acts on it; done reports whether Run's wait
// is over, with the lease, or the outcome and error Run ends with.
func (o *obtainer) step(ctx context.Context) (lease *Lease, outcome Outcome, err error, done bool) {
	m, log := o.m, o.m.cfg.logger
	if ctx.Err() != nil {
		return nil, NoOutcome, errNotObtained(ctx), true
	}
	octx, cancel := detached(ctx, m.cfg.finishTimeout)
	defer cancel()
	r, err := m.store.read(octx, m.name)
	if err != nil {
		if !spanerr.Transient(err) && ctx.Err() == nil {
			return nil, NoOutcome, err, true
		}
		if err := o.reads.failed(ctx, err, 0); err != nil {
			return nil, NoOutcome, err, true
		}
		return nil, NoOutcome, nil, false
	}
	o.reads.ok()
	if p, ok := o.unresolved[r.LeaseID]; ok && r.State == StateStarted {
		log.Info("commit of unknown outcome read back as ours", "token", r.Token)
		delete(o.unresolved, r.LeaseID)
		return m.adopt(r, p), NoOutcome, nil, true
	}
	d := decide(r, o.pol)
	switch d.action {
	case actDone:
		log.Debug("already done", "token", r.Token)
		return nil, AlreadyDone, nil, true
	case actExhausted:
		return nil, NoOutcome, &exhaustedError{Name: m.name, Attempts: r.Attempts, MaxAttempts: m.cfg.maxAttempts, LastError: r.LastError}, true
	case actWait:
		log.Debug("held elsewhere; waiting", "holder", r.Owner, "token", r.Token, "takeover_in", d.wait)
		o.sess.pause() // a wait needs no session of ours
		o.watch(ctx)
		err := o.pauseOrWake(ctx, d.wait)
		return nil, NoOutcome, err, err != nil
	case actAcquire:
		if d.retry {
			log.Info("last attempt failed; backing off before a retry", "attempts", r.Attempts, "last_error", r.LastError)
			if err := o.acquires.pause(ctx, 0); err != nil {
				return nil, NoOutcome, err, true
			}
		}
	}
	return o.acquire(ctx, r)
}

// acquire decides again on the row inside a read-write transaction, on
// Spanner's clock, and writes what that decides (actAcquire, actTakeOver,
// actAbandon); r is the snapshot that suggested it.
func (o *obtainer) acquire(ctx context.Context, r row) (lease *Lease, outcome Outcome, err error, done bool) {
	m, log := o.m, o.m.cfg.logger
	c := claim{owner: m.cfg.owner, leaseID: uuid.NewString()}
	c.session, c.startSession = o.sess.name()
	sent := m.cfg.clock.Now()
	octx, cancel := detached(ctx, m.cfg.finishTimeout)
	defer cancel()
	d, lease, err := m.store.acquire(octx, m.name, o.pol, c)
	o.sess.written(c, sent, lease, err)
	if err != nil {
		if !spanerr.Retryable(err) && ctx.Err() == nil {
			return nil, NoOutcome, err, true
		}
		// d is what the transaction's last run decided: if its commit
		// landed, it is what was written.
		p := pendingAcquisition{sent: sent, takeover: d.action == actTakeOver}
		o.unresolved[c.leaseID] = p
		log.Warn("acquire failed or its outcome is unknown; reading the row again", "err", err)
		if l := m.resolve(ctx, c.leaseID, p); l != nil {
			delete(o.unresolved, c.leaseID)
			return l, NoOutcome, nil, true
		}
		if err := o.acquires.failed(ctx, err, 0); err != nil {
			return nil, NoOutcome, err, true
		}
		return nil, NoOutcome, nil, false
	}
	o.acquires.ok()
	switch {
	case lease != nil:
		lease.anchor = sent
		log.Info("acquired", "token", lease.token, "takeover", lease.takeover)
		return lease, NoOutcome, nil, true
	case d.action == actAbandon:
		log.Warn("holder abandoned the last allowed attempt; recorded FAILED", "holder", r.Owner, "token", r.Token)
		return nil, NoOutcome, &exhaustedError{Name: m.name, Attempts: int64(m.cfg.maxAttempts), MaxAttempts: m.cfg.maxAttempts,
			LastError: "holder " + r.Owner + " went silent past its lease on the last attempt"}, true
	}
	// Someone else changed the row between our snapshot and our
	// transaction; the next read shows what happened.
	return nil, NoOutcome, nil, false
}

// resolve reads the row to settle an acquisition whose commit outcome is
// unknown. It returns the lease if the row shows that the commit happened.
// It reads even if ctx is done, within the finish timeout: a lease we hold
// without knowing it would block everyone until its lease runs out.
func (m *Mutex) resolve(ctx context.Context, leaseID string, p pendingAcquisition) *Lease {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.finishTimeout)
	defer cancel()
	r, err := m.store.read(rctx, m.name)
	if err != nil || r.State != StateStarted || r.LeaseID != leaseID {
		return nil
	}
	return m.adopt(r, p)
}

// pendingAcquisition is an acquisition whose commit outcome is unknown.
type pendingAcquisition struct {
	sent     time.Time // when its request was sent: the anchor of its renewals
	takeover bool      // whether it took over a silent holder, if it landed
}

// adopt makes a lease of a row read back as ours.
func (m *Mutex) adopt(r row, p pendingAcquisition) *Lease {
	l := newLease(m.name, r.Owner, r.LeaseID, r.Token, p.takeover, m.cfg.table)
	l.acquiredAt, l.anchor, l.attempt, l.session = r.StartedAt, p.sent, r.Attempts, r.Session
	return l
}

// settle reads back the acquisitions whose commit outcome is still unknown,
// oldest first, and gives back any that did commit, so that nobody waits a
// lease for a holder that has left. It runs even if ctx is done.
func (m *Mutex) settle(ctx context.Context, unresolved map[string]pendingAcquisition) {
	// In the order they were sent, not the map's, which differs run to run
	// (the simulation replays a seed exactly).
	ids := slices.SortedFunc(maps.Keys(unresolved), func(a, b string) int {
		return cmp.Or(unresolved[a].sent.Compare(unresolved[b].sent), strings.Compare(a, b))
	})
	for _, id := range ids {
		if l := m.resolve(ctx, id, unresolved[id]); l != nil {
			m.giveBack(ctx, l)
		}
		delete(unresolved, id)
	}
}

// giveBack releases a lease whose section never ran.
func (m *Mutex) giveBack(ctx context.Context, l *Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.finishTimeout)
	defer cancel()
	if err := m.store.release(rctx, l); err != nil {
		m.cfg.logger.Warn("could not give back an unused lease; others wait until it runs out", "token", l.token, "err", err)
	}
}

// runHeld runs fn as the holder of lease and records how it ended.
func (m *Mutex) runHeld(ctx context.Context, lease *Lease, fn func(context.Context, *Lease) error) (_ Outcome, err error) {
	defer func() { lease.end(err) }() // Done closes: released, or lost
	if ctx.Err() != nil {
		if lease.leaveSession != nil {
			lease.leaveSession() // granted through its session, which need not keep it
		}
		m.giveBack(ctx, lease)
		return NoOutcome, errNotObtained(ctx)
	}
	// The section's ctx ends with the caller's, or when the lease is lost,
	// with the error matching ErrLeaseLost as its cause.
	sctx, cancelSection := context.WithCancelCause(ctx)
	defer cancelSection(nil)
	// retry: set when recording the section's end did not land.
	var retry func(context.Context) error
	defer func() { m.finishLater(lease, retry) }()
	finish := func(to State, lastError string) error {
		err := m.finish(ctx, lease, to, lastError)
		if err != nil && !errors.Is(err, ErrLeaseLost) {
			retry = func(c context.Context) error { return m.finish(c, lease.fencedAs(), to, lastError) }
		}
		return err
	}
	sctx, hold := m.cfg.tel.start(sctx, "spanmutex.section", "run", attrToken.Int64(lease.token)) // telemetry.go
	lease.setHold(hold)
	stopRenewing := m.keepHeld(lease, cancelSection)
	defer stopRenewing()
	defer func() {
		if p := recover(); p != nil {
			// Record the failure, then let the panic go on: it is the
			// caller's bug, not ours to hide.
			stopRenewing()
			_ = finish(StateFailed, fmt.Sprintf("panic: %v", p))
			panic(p)
		}
	}()
	panicked := true // until fn returns
	defer func() {   // telemetry.go
		outcome := sectionOutcome(err)
		if panicked {
			outcome = "panic"
		}
		lease.holdOp().held(lease, outcome, err)
	}()
	runErr := fn(sctx, lease)
	panicked = false
	stopRenewing()
	var interrupted *InterruptedError
	if errors.As(runErr, &interrupted) {
		return Executed, m.interrupted(ctx, lease, interrupted)
	}
	if runErr != nil {
		secErr := &SectionError{Name: m.name, Token: lease.token, Attempt: lease.attempt, Err: runErr}
		if err := finish(StateFailed, runErr.Error()); err != nil {
			return Executed, joinErrors(secErr, err)
		}
		m.cfg.logger.Info("section failed; recorded FAILED", "token", lease.token, "attempt", lease.attempt, "max_attempts", m.cfg.maxAttempts, "err", runErr)
		return Executed, secErr
	}
	if err := finish(StateDone, ""); err != nil {
		return Executed, err
	}
	m.cfg.logger.Info("section done", "token", lease.token)
	return Executed, nil
}

// keepHeld keeps lease alive while its section runs: its session does, if
// it was granted through one (followSession), else its own renewals
// (keepAlive). Once the lease is lost, Done closes and the section's ctx
// is cancelled (cancel) with the lease's error. The returned stop ends
// that; it may be called more than once.
func (m *Mutex) keepHeld(lease *Lease, cancel context.CancelCauseFunc) (stop func()) {
	if lease.leaveSession != nil {
		return followSession(lease, m.cfg.tel.lost(lease, cancel)) // mutex_session.go
	}
	return keepAlive(m.store, &m.cfg, lease, lease.anchor, func(err error) {
		lease.lose(err)
		cancel(err)
	})
}

// finishLater retries, if recording the end of the section of lease, held
// through its session, did not land (retry is not nil), that record in the
// background (retryEnd) while the session is alive: the lease left the
// session with its section, but a row that names a live session is live
// (STARTED, and nobody could run the section again).
func (m *Mutex) finishLater(lease *Lease, retry func(context.Context) error) {
	if retry == nil || lease.through == nil {
		return
	}
	retryEnd(m.cfg.clock, m.cfg.renewEvery(), func() bool { return lease.through.alive(lease.session) }, func() bool {
		err := retry(context.Background())
		ended := err == nil || errors.Is(err, ErrLeaseLost)
		if ended {
			m.cfg.logger.Debug("the end of the section, retried in the background, was recorded or found lost", "token", lease.token, "err", err)
		}
		return ended
	}, nil)
}

// finish records DONE or FAILED, fenced on the lease. A try whose answer
// was lost is settled by reading the row (lostWrite): our lease in the
// target state, it committed; still STARTED under our lease, try again;
// moved on, the row's history says whether it committed, and no further
// try is sent.
//
// It runs even if ctx was cancelled (a section stopped by SIGTERM still
// records FAILED), for at most the finish timeout from when it is called.
func (m *Mutex) finish(ctx context.Context, lease *Lease, to State, lastError string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.finishTimeout)
	defer cancel()
	bo := m.cfg.newBackOff()
	w := newLostWrite(lease, to)
	var unknown, err error // unknown: the answer of an earlier try that may have landed
	for {
		if !w.movedOn() {
			err = m.store.finish(ctx, lease, to, lastError)
			if err == nil || (errors.Is(err, ErrLeaseLost) && unknown == nil) {
				return err
			}
			if !errors.Is(err, ErrLeaseLost) {
				unknown = err
			}
		}
		landed, r, werr := w.settle(ctx, m.store)
		switch {
		case werr != nil: // unknown yet: try again
			err = werr
		case landed:
			return nil // ours landed (and others may have started the section again since)
		case !r.heldBy(lease.id):
			return lease.lostTo(r)
		}
		m.cfg.logger.Warn("recording the end of the section failed; retrying", "state", to, "err", err)
		if perr := pauseWith(ctx, m.cfg.clock, bo, 0, nil); perr != nil {
			// Whether a try landed is still unknown: say so, not that the
			// lease was lost.
			return fmt.Errorf("spanmutex: section %q (token %d): could not record %s: %w", m.name, lease.token, to, unknown)
		}
	}
}
