package spanmutex

import (
	"fmt"
	"time"
)

// semView is what one read of a semaphore shows: its row, Spanner's clock,
// and every entry of its queue, oldest first.
type semView struct {
	now     time.Time
	exists  bool
	state   State
	size    int64 // the row's Permits; 0 when NULL
	token   int64 // the last token issued
	entries []semEntry
}

// semRequest is what a contender asks of one read-write transaction on a
// semaphore: to hold n permits (me's entry, joining with join when it
// cannot hold them at once), to release token's permits, or to leave.
type semRequest struct {
	me      string
	owner   string
	n       int64
	size    int64
	lease   time.Duration // the contender's own: declared by its entry
	wake    string
	op      semOp
	token   int64 // semRelease: the lease released
	resized bool  // the size is set, not checked (Semaphore.Resize)
	// session is the live session of the contender's Scope ("": none):
	// its entry names it, and the permits it is granted in this
	// transaction (at once, or its waiting entry's) are held through it.
	session string
	// start is the session's row if the transaction starts the session
	// (session.next): a transaction that writes the session's id inserts
	// it too. nil otherwise.
	start *sessionRow
}

// semOp is the kind of a semRequest.
type semOp int

const (
	semAcquire semOp = iota + 1 // hold n, queueing if need be
	semTry                      // hold n only at once, writing nothing otherwise
	semRelease                  // delete the holder's entry, fenced by token
	semLeave                    // delete every entry of me, granted or not
	semSettle                   // grant what may be granted, nothing of me
)

// semGrant is a waiting entry a transaction grants, with its token, and
// the session it holds through: the contender's own entry, granted by its
// own transaction, holds through the contender's session (its process is
// alive now); any other is granted with its declared lease, renewed on its
// own, as a Lock's hand-off is (a waiter gone, or a stray entry of a call
// that ended, then costs one lease, not the life of its Scope's session).
type semGrant struct {
	entry   semEntry
	token   int64
	session string
}

// semPlan is what a transaction writes on a semaphore, decided by planSem
// on what it read: entries deleted (lapsed holders, dead waiters, the
// releaser's), waiting entries granted in queue order with the next tokens,
// and the contender's own new entry (granted when its token is set). mine
// is the contender's entry after the plan: held when its token is set.
type semPlan struct {
	deletes  []semEntry
	grants   []semGrant
	insert   *semEntry
	token    int64 // the row's last token after the plan
	mine     *semEntry
	tookOver bool // a lapsed holder's permits were counted free
	writes   bool // the plan writes something: else nothing is committed
}

// errSemWrongKind names a row that a Lock or Mutex owns.
func errSemWrongKind(name string, st State) error {
	return fmt.Errorf("spanmutex: semaphore %q: the row is %s: it belongs to a Lock or a run-once Mutex of the same name; use another name", name, st)
}

// SizeMismatchError is returned when a Semaphore or RWLock declares a size
// other than the one stored with its name. Nothing was written.
type SizeMismatchError struct {
	Name     string
	Stored   int64 // the size stored with the name
	Declared int64 // the size this contender declared
}

func (e *SizeMismatchError) Error() string {
	return fmt.Sprintf("spanmutex: semaphore %q has size %d, but this contender declared %d; use size %d, or change it with Resize (spanmutex resize)",
		e.Name, e.Stored, e.Declared, e.Stored)
}

// planSem decides, on view v read inside the deciding transaction with
// Spanner's clock, what request q writes. The grant rule: holders whose
// declared lease lapsed and waiters dead past waiterTTLFactor leases are
// deleted; then waiting entries are granted oldest first while their
// permits fit beside the live holders' (none overtakes a waiter that does
// not fit: no barging); a new contender holds at once only if nobody live
// waits and its permits fit.
func planSem(name string, v semView, q semRequest) (semPlan, error) {
	if v.exists && v.state != StateShared {
		return semPlan{}, errSemWrongKind(name, v.state)
	}
	entering := q.op == semAcquire || q.op == semTry
	if v.exists && v.size != q.size && entering {
		return semPlan{}, &SizeMismatchError{Name: name, Stored: v.size, Declared: q.size}
	}
	size := q.size
	if v.exists && !q.resized {
		size = v.size // the stored size rules: a Release need not know it
	}
	p := semPlan{token: v.token}
	live, err := p.sweep(v, q, size)
	if err != nil {
		return semPlan{}, err
	}
	used := p.grantHeads(live, size, q.session)
	if p.mine == nil && entering {
		p.enter(used, size, q)
	}
	p.writes = len(p.deletes) > 0 || len(p.grants) > 0 || p.insert != nil || q.resized
	return p, nil
}

// sweep walks v's entries: it deletes lapsed holders, dead waiters, the
// waiters of a lapsed holder's Scope (its process is taken to be dead or
// cut off, its other entries with it, as a Lock's takeover does:
// sameScopeAsSilent), waiters that ask for more than size (the size was
// made smaller: they can never be granted, and would block everyone behind
// them; their contenders, declaring another size, end with a
// *SizeMismatchError) and what q deletes of its own (semRelease,
// semLeave), and returns the live entries left, oldest first; the plan's
// mine is q's live entry, if any.
func (p *semPlan) sweep(v semView, q semRequest, size int64) ([]semEntry, error) {
	silent := map[string]bool{}
	for _, e := range v.entries {
		if e.permits != 0 && e.token != 0 && scopeOf(e.id) != "" && !semEntryLive(e, v.now, q.lease) {
			silent[scopeOf(e.id)] = true
		}
	}
	var (
		live     []semEntry
		released bool
	)
	for _, e := range v.entries {
		switch {
		case e.permits == 0:
			continue // not a semaphore's entry
		case e.id == q.me && (q.op == semRelease || q.op == semLeave):
			// A release deletes strays of ours too (settles of unknown
			// outcome), fenced by the entry holding its token.
			p.deletes = append(p.deletes, e)
			released = released || e.token == q.token && semEntryLive(e, v.now, q.lease)
		case !semEntryLive(e, v.now, q.lease) || e.token == 0 && e.id != q.me && silent[scopeOf(e.id)]:
			p.deletes = append(p.deletes, e)
			p.tookOver = p.tookOver || e.token != 0
		case e.token == 0 && e.permits > size:
			p.deletes = append(p.deletes, e)
		default:
			live = append(live, e)
			if e.id == q.me && p.mine == nil {
				mine := e
				p.mine = &mine
			}
		}
	}
	if q.op == semRelease && !released {
		return nil, errSemReleased
	}
	return live, nil
}

// errSemReleased: the releaser's entry was not found holding its token: its
// lease lapsed and was deleted by another contender.
var errSemReleased = fmt.Errorf("%w: the holder's entry is gone", ErrLeaseLost)

// grantHeads grants the live waiting entries of live, oldest first, while
// their permits fit in size beside the holders', and stops at the first
// that does not. It returns the permits held after the grants, or size+1
// when a live waiter is left waiting (so that nobody behind it fits).
func (p *semPlan) grantHeads(live []semEntry, size int64, session string) int64 {
	var used int64
	for _, e := range live {
		if e.token != 0 {
			used += e.permits
		}
	}
	for _, e := range live {
		if e.token != 0 {
			continue
		}
		if used+e.permits > size {
			return size + 1
		}
		p.token++
		used += e.permits
		g := semGrant{entry: e, token: p.token}
		if p.mine != nil && p.mine.key() == e.key() {
			g.session = session
			p.mine.token = p.token
			p.mine.holdThrough(session)
		}
		p.grants = append(p.grants, g)
	}
	return used
}

// enter adds q's contender, not queued yet: holding at once if its
// permits fit in size beside used (which counts a live waiter left waiting as
// full), waiting at the back otherwise (semAcquire), or nothing (semTry).
func (p *semPlan) enter(used, size int64, q semRequest) {
	e := semEntry{id: q.me, owner: q.owner, lease: q.lease, permits: q.n, wake: q.wake, session: q.session}
	if used+q.n <= size {
		p.token++
		e.token = p.token
		e.holdThrough(q.session)
	} else if q.op == semTry {
		p.deletes, p.grants, p.token = nil, nil, p.token-int64(len(p.grants))
		return
	}
	p.insert, p.mine = &e, &e
}

// holdThrough makes e, granted now, held through session id (if not ""):
// it names the session and declares sessionHeldLease.
func (e *semEntry) holdThrough(id string) {
	if id != "" {
		e.session, e.lease, e.throughSession = id, sessionHeldLease, true
	}
}

// names reports whether the plan writes session id (not "") into an
// entry: the contender's new entry, or its own entry granted.
func (p *semPlan) names(id string) bool {
	if id == "" {
		return false
	}
	if p.insert != nil && p.insert.session == id {
		return true
	}
	for _, g := range p.grants {
		if g.session == id {
			return true
		}
	}
	return false
}

// grantedMine reports whether this plan granted mine, a waiting entry.
func (p *semPlan) grantedMine() bool {
	for _, g := range p.grants {
		if p.mine != nil && g.entry.key() == p.mine.key() {
			return true
		}
	}
	return false
}
