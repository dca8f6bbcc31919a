package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"
)

// Mutex is a named run-once critical section backed by one row of a Cloud
// Spanner table. Create it with New. A Mutex is safe for concurrent use; each
// Run call is an independent contender with its own acquisition id.
type Mutex struct {
	name          string
	cfg           config
	store         store
	schemaChecked atomic.Bool
}

// New returns a Mutex for the critical section name, stored in client's
// database. It validates every input and option and does no I/O: problems
// with the table are reported by the first Run. Every error it returns wraps
// ErrInvalidConfig.
func New(client *spanner.Client, name string, opts ...Option) (*Mutex, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil *spanner.Client: open one with spanner.NewClient", ErrInvalidConfig)
	}
	m, err := newMutex(name, opts)
	if err != nil {
		return nil, err
	}
	st := newSpannerStore(client, m.cfg.table)
	st.versioned = m.cfg.version != ""
	m.store = st
	return m, nil
}

func newMutex(name string, opts []Option) (*Mutex, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	cfg := defaultConfig()
	for i, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: option %d is nil", ErrInvalidConfig, i)
		}
		opt(&cfg)
	}
	if cfg.owner == "" {
		cfg.owner = defaultOwner()
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.logger = cfg.logger.With("mutex", name, "owner", cfg.owner)
	return &Mutex{name: name, cfg: cfg}, nil
}

// defaultOwner is host:pid:random, unique per Mutex.
func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return truncate(fmt.Sprintf("%s:%d:%s", host, os.Getpid(), uuid.NewString()[:8]), MaxNameLength-1)
}

// Name returns the section's name.
func (m *Mutex) Name() string { return m.name }

// Owner returns the owner identity this Mutex records as holder.
func (m *Mutex) Owner() string { return m.cfg.owner }

// unreached adds to err, if no Spanner call has succeeded yet, that Spanner
// may be unreachable.
func (m *Mutex) unreached(err error) error {
	if st, ok := m.store.(*spannerStore); ok {
		return st.unreached(err)
	}
	return err
}

// Stats returns the Spanner operations this Mutex has made so far.
func (m *Mutex) Stats() Stats {
	if st, ok := m.store.(*spannerStore); ok {
		return st.stats.snapshot()
	}
	return Stats{}
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
//   - Executed, *LeaseLostError: fn ran here and returned, but the row had
//     been taken over meanwhile (its renewals did not reach Spanner for a
//     watermark, or it was recorded abandoned).
//   - NoOutcome, *ExhaustedError: the section failed on its last allowed
//     attempt, or Spanner kept failing; fn did not run here.
//   - NoOutcome, errors.Join(ErrNotObtained, ctx.Err()): ctx ended while
//     waiting; fn did not run here.
//
// fn runs only after the commit that made this call the holder was
// acknowledged by Spanner (or, if its outcome was unknown, read back). fn's
// ctx is cancelled when Run's ctx is. While another holder runs the section,
// Run waits with lock-free reads and takes over only after the watermark
// plus jitter has passed by Spanner's clock.
func (m *Mutex) Run(ctx context.Context, fn func(ctx context.Context, lease *Lease) error) (Outcome, error) {
	if ctx == nil {
		return NoOutcome, errNilContext
	}
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
	if err := m.checkSchema(ctx); err != nil {
		return NoOutcome, m.unreached(notObtained(ctx, err))
	}
	lease, outcome, err := m.obtain(ctx)
	if lease == nil {
		return outcome, m.unreached(notObtained(ctx, err))
	}
	return m.runHeld(ctx, lease, fn)
}

// checkSchema checks the table once per Mutex, so that a missing table or
// column is reported by name before anything is written.
func (m *Mutex) checkSchema(ctx context.Context) error {
	if m.schemaChecked.Load() {
		return nil
	}
	// Transient errors are retried like failed reads: MaxAttempts in a row.
	bo := m.cfg.newBackOff()
	for failures := 1; ; failures++ {
		err := m.store.checkSchema(ctx)
		if err == nil {
			m.schemaChecked.Store(true)
			return nil
		}
		if !isTransient(err) || ctx.Err() != nil {
			return err
		}
		if failures >= m.cfg.maxAttempts {
			return &ExhaustedError{Name: m.name, Attempts: int64(failures), MaxAttempts: m.cfg.maxAttempts, LastError: err.Error(), Err: err}
		}
		if perr := m.pause(ctx, bo, 0); perr != nil {
			return err
		}
	}
}

// obtain loops until this call holds the section (lease non-nil) or knows
// how Run ends without running it.
func (m *Mutex) obtain(ctx context.Context) (*Lease, Outcome, error) {
	log := m.cfg.logger
	pol := policy{
		watermark:   m.cfg.watermark,
		staleness:   m.cfg.staleness,
		jitter:      drawJitter(m.cfg.watermark, m.cfg.jitter),
		maxAttempts: int64(m.cfg.maxAttempts),
		version:     m.cfg.version,
	}
	bo := m.cfg.newBackOff()
	// unresolved holds the ids of acquisitions whose commit outcome is
	// unknown, with the local time each was sent and whether it was a
	// takeover. If a later read finds the row STARTED under one of them,
	// that commit did happen and the section is ours; if Run ends first,
	// they are settled and given back.
	unresolved := map[string]pendingAcquisition{}
	giveUp := func(err error) (*Lease, Outcome, error) {
		m.settle(ctx, unresolved)
		return nil, NoOutcome, err
	}
	// waitOrGiveUp pauses; if ctx ends or the backoff policy stops, it
	// returns the error Run ends with.
	waitOrGiveUp := func(limit time.Duration) error {
		err := m.pause(ctx, bo, limit)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errBackOffStopped):
			return &ExhaustedError{Name: m.name, MaxAttempts: m.cfg.maxAttempts, LastError: "the backoff policy stopped", Err: err}
		}
		return errors.Join(ErrNotObtained, ctx.Err())
	}
	// Failed Spanner calls in a row, of each kind; MaxAttempts bounds both.
	failedReads, failedAcquires := 0, 0
	exhausted := func(n int, err error) error {
		return &ExhaustedError{Name: m.name, Attempts: int64(n), MaxAttempts: m.cfg.maxAttempts, LastError: err.Error(), Err: err}
	}
	for {
		if ctx.Err() != nil {
			return giveUp(errors.Join(ErrNotObtained, ctx.Err()))
		}
		r, err := m.store.read(ctx, m.name)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return giveUp(errors.Join(ErrNotObtained, ctx.Err()))
			case !isTransient(err):
				return giveUp(err)
			}
			if failedReads++; failedReads >= m.cfg.maxAttempts {
				return giveUp(exhausted(failedReads, err))
			}
			log.Warn("read failed; backing off", "err", err)
			if err := waitOrGiveUp(0); err != nil {
				return giveUp(err)
			}
			continue
		}
		failedReads = 0
		if p, ok := unresolved[r.LeaseID]; ok && r.State == StateStarted {
			log.Info("commit of unknown outcome read back as ours", "token", r.Token)
			return m.adopt(r, p), NoOutcome, nil
		}
		d := decide(r, pol)
		switch d.action {
		case actDone:
			log.Debug("already done", "token", r.Token)
			m.settle(ctx, unresolved)
			return nil, AlreadyDone, nil
		case actExhausted:
			return giveUp(&ExhaustedError{Name: m.name, Attempts: r.Attempts, MaxAttempts: m.cfg.maxAttempts, LastError: r.LastError})
		case actWait:
			log.Debug("held elsewhere; waiting", "holder", r.Owner, "token", r.Token, "takeover_in", d.wait)
			if err := waitOrGiveUp(d.wait); err != nil {
				return giveUp(err)
			}
			continue
		case actAcquire:
			if d.retry {
				log.Info("last attempt failed; backing off before a retry", "attempts", r.Attempts, "last_error", r.LastError)
				if err := waitOrGiveUp(0); err != nil {
					return giveUp(err)
				}
			}
		}
		// actAcquire, actTakeOver, actAbandon: decide again inside a
		// read-write transaction, on Spanner's clock, and write.
		c := claim{owner: m.cfg.owner, leaseID: uuid.NewString()}
		sent := m.cfg.clock.Now()
		d2, lease, err := m.store.acquire(ctx, m.name, pol, c)
		if err != nil {
			if !isTransient(err) && !isUnknownOutcome(err) && ctx.Err() == nil {
				return giveUp(err)
			}
			// d2 is what the transaction's last run decided: if its commit
			// landed, it is what was written.
			p := pendingAcquisition{sent: sent, takeover: d2.action == actTakeOver}
			unresolved[c.leaseID] = p
			log.Warn("acquire failed or its outcome is unknown; reading the row again", "err", err)
			if l := m.resolve(ctx, c.leaseID, p); l != nil {
				delete(unresolved, c.leaseID)
				m.settle(ctx, unresolved)
				return l, NoOutcome, nil
			}
			if failedAcquires++; failedAcquires >= m.cfg.maxAttempts {
				return giveUp(exhausted(failedAcquires, err))
			}
			if err := waitOrGiveUp(0); err != nil {
				return giveUp(err)
			}
			continue
		}
		failedAcquires = 0
		if lease != nil {
			lease.anchor = sent
			log.Info("acquired", "token", lease.token, "takeover", lease.takeover)
			m.settle(ctx, unresolved)
			return lease, NoOutcome, nil
		}
		if d2.action == actAbandon {
			log.Warn("holder abandoned the last allowed attempt; recorded FAILED", "holder", r.Owner, "token", r.Token)
			return giveUp(&ExhaustedError{Name: m.name, Attempts: int64(m.cfg.maxAttempts), MaxAttempts: m.cfg.maxAttempts,
				LastError: "holder " + r.Owner + " went silent past the watermark on the last attempt"})
		}
		// Someone else changed the row between our snapshot and our
		// transaction; the next read shows what happened.
	}
}

// resolve reads the row to settle an acquisition whose commit outcome is
// unknown. It returns the lease if the row shows that the commit happened.
// It reads even if ctx is done, within the finish timeout: a lease we hold
// without knowing it would block everyone until the watermark.
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
	l.acquiredAt, l.anchor = r.StartedAt, p.sent
	return l
}

// settle reads back the acquisitions whose commit outcome is still unknown
// and gives back any that did commit, so that nobody waits a watermark for
// a holder that has left. It runs even if ctx is done.
func (m *Mutex) settle(ctx context.Context, unresolved map[string]pendingAcquisition) {
	for id, p := range unresolved {
		if l := m.resolve(ctx, id, p); l != nil {
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
		m.cfg.logger.Warn("could not give back an unused lease; others wait for the watermark", "token", l.token, "err", err)
	}
}

// notObtained makes an error that ended a wait because ctx ended (a Spanner
// call cut short by the deadline, say) match ErrNotObtained and ctx.Err(),
// as documented, keeping the error itself in the chain.
func notObtained(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ErrNotObtained) {
		return err
	}
	return errors.Join(ErrNotObtained, ctx.Err(), err)
}

// errBackOffStopped is returned by pause when the backoff policy says Stop.
var errBackOffStopped = errors.New("spanmutex: the backoff policy stopped")

// pause waits for the next backoff interval, capped at limit when limit > 0.
func (m *Mutex) pause(ctx context.Context, bo backoff.BackOff, limit time.Duration) error {
	return pauseWith(ctx, m.cfg.clock, bo, limit)
}

// pauseWith waits on clk for bo's next interval, capped at limit when limit >
// 0, or until ctx ends. It uses the local clock only to pace reads; it
// decides nothing.
func pauseWith(ctx context.Context, clk clock, bo backoff.BackOff, limit time.Duration) error {
	d := bo.NextBackOff()
	if d == backoff.Stop {
		return errBackOffStopped
	}
	if limit > 0 && d > limit {
		d = limit
	}
	return sleep(ctx, clk, d)
}

// sleep waits d on clk, or until ctx ends.
func sleep(ctx context.Context, clk clock, d time.Duration) error {
	c, stop := clk.NewTimer(d)
	defer stop()
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runHeld runs fn as the holder of lease and records how it ended.
func (m *Mutex) runHeld(ctx context.Context, lease *Lease, fn func(context.Context, *Lease) error) (Outcome, error) {
	if ctx.Err() != nil {
		m.giveBack(ctx, lease)
		return NoOutcome, errors.Join(ErrNotObtained, ctx.Err())
	}
	// The section's ctx ends with the caller's, or when the lease is lost,
	// with the *LeaseLostError as its cause.
	sctx, cancelSection := context.WithCancelCause(ctx)
	defer cancelSection(nil)
	stopRenewing := keepAlive(m.store, &m.cfg, lease, lease.anchor, func(err error) {
		lease.lose(err)
		cancelSection(err)
	})
	defer stopRenewing()
	defer func() {
		if p := recover(); p != nil {
			// Record the failure, then let the panic go on: it is the
			// caller's bug, not ours to hide.
			stopRenewing()
			_ = m.finish(ctx, lease, StateFailed, fmt.Sprintf("panic: %v", p))
			panic(p)
		}
	}()
	runErr := fn(sctx, lease)
	stopRenewing()
	var interrupted *InterruptedError
	if errors.As(runErr, &interrupted) {
		return Executed, m.interrupted(ctx, lease, interrupted)
	}
	if runErr != nil {
		secErr := &SectionError{Name: m.name, Token: lease.token, Err: runErr}
		if err := m.finish(ctx, lease, StateFailed, runErr.Error()); err != nil {
			return Executed, errors.Join(secErr, err)
		}
		m.cfg.logger.Info("section failed; recorded FAILED", "token", lease.token, "err", runErr)
		return Executed, secErr
	}
	if err := m.finish(ctx, lease, StateDone, ""); err != nil {
		return Executed, err
	}
	m.cfg.logger.Info("section done", "token", lease.token)
	return Executed, nil
}

// finish records DONE or FAILED, fenced on the lease. A commit whose outcome
// is unknown is settled by reading the row: if it shows our lease in the
// target state, it committed; if still STARTED under our lease, try again.
//
// It runs even if ctx was cancelled (a section stopped by SIGTERM still
// records FAILED), for at most the finish timeout from when it is called.
func (m *Mutex) finish(ctx context.Context, lease *Lease, to State, lastError string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.finishTimeout)
	defer cancel()
	bo := m.cfg.newBackOff()
	for {
		err := m.store.finish(ctx, lease, to, lastError)
		if err == nil || errors.Is(err, ErrLeaseLost) {
			return err
		}
		r, rerr := m.store.read(ctx, m.name)
		if rerr == nil && r.LeaseID == lease.id && r.State == to {
			return nil
		}
		if rerr == nil && (r.LeaseID != lease.id || r.State != StateStarted) {
			return &LeaseLostError{Name: m.name, Token: lease.token, CurrentState: r.State, CurrentOwner: r.Owner, CurrentToken: r.Token}
		}
		m.cfg.logger.Warn("recording the end of the section failed; retrying", "state", to, "err", err)
		if perr := m.pause(ctx, bo, 0); perr != nil {
			return fmt.Errorf("spanmutex: section %q (token %d): could not record %s: %w", m.name, lease.token, to, err)
		}
	}
}
