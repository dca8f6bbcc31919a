package spanmutex

import (
	"fmt"
	"time"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/leaserule"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

// When a queue entry counts as live, a rule every primitive that queues
// applies: a waiter's entry for waiterTTLFactor of its declared lease
// unrenewed, by Spanner's clock. The Lock reads it in SQL (liveEntry, held
// to its hand-off's Go form, takes, by TestLivenessRulesAgree); the
// Semaphore's decisions and Inspect apply it to an entry read whole
// (semEntryLive).

// waiterTTLFactor: a queued waiter proves it is alive every two of its
// declared leases, and its entry counts as dead once it has not for four. A
// dead waiter that is handed the lock before that costs one lease, as a
// crashed holder does; renewing more often would cost blind writes from
// every waiter all the time.
const waiterTTLFactor = 4

// liveEntry is the SQL condition, on queue entry q, that the waiter renewed
// it within waiterTTLFactor of its declared leases (or of @lease, the
// reader's own, for an entry that declared none) by Spanner's clock, in
// dialect d (interval arithmetic is spelled differently in each): takes's
// rule (TestLivenessRulesAgree holds the two to the same cases). With
// sessions (the sessions table's name; "" if the table has none), a
// renewal of the session the entry names counts as the entry's.
func liveEntry(d ddl.Dialect, sessions string) string {
	since := sqldialect.SubMicros(d, "CURRENT_TIMESTAMP()", fmt.Sprintf("%d * COALESCE(q.`LeaseMicros`, @lease)", waiterTTLFactor))
	if sessions == "" {
		return "q.`RenewedAt` > " + since
	}
	return "(q.`RenewedAt` > " + since + " OR EXISTS(SELECT 1 FROM `" + sessions + "` AS qs WHERE qs.`SessionID` = q.`Session` AND qs.`RenewedAt` > " + since + "))"
}

// withSession returns e, read with the session it names (its RenewedAt,
// and LeaseMicros as lease, if found), judged by it as row.withSession
// judges a row: a holder that declares sessionHeldLease is held through
// the session, whose last renewal counts as its own and whose lease as
// its lease (its own RenewedAt and the reader's lease if the session is
// gone); a waiting entry's session renewals count as its own (liveEntry).
// A holder that names a session but declares its own lease was granted
// by a reader that does not read sessions: it is judged on its own.
func (e semEntry) withSession(renewedAt time.Time, lease time.Duration, found bool) semEntry {
	switch {
	case e.session == "":
	case e.token == 0 && found:
		e.renewed = latest(e.renewed, renewedAt)
	case e.token != 0 && e.lease == sessionHeldLease:
		e.throughSession, e.lease = true, 0
		if found {
			e.renewed, e.lease = latest(e.renewed, renewedAt), lease
		}
	}
	return e
}

// semEntryLive reports whether e counts at Spanner time now: a holder until
// its declared lease (own if it declared none) has passed since its last
// renewal; a waiter for waiterTTLFactor of those.
func semEntryLive(e semEntry, now time.Time, own time.Duration) bool {
	return e.left(now, own) > 0
}

// left is how long, at Spanner time now, e has still to live unrenewed: a
// holder's declared lease (own if it declared none), a waiter's
// waiterTTLFactor of them, less its silence. At or below 0 it is dead.
func (e semEntry) left(now time.Time, own time.Duration) time.Duration {
	lease := leaserule.Declared(e.lease, own)
	if e.token == 0 {
		lease = waiterTTLFactor * lease
	}
	return lease - leaserule.Silent(now, e.renewed)
}
