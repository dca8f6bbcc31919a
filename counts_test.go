package spanmutex

// The operation and wake-up counts the tests read; the library only counts.

// opCounts counts the Spanner operations a Mutex or Lock has made, read from
// its store's counters (storeStats). Counts are cumulative.
type opCounts struct {
	// rw counts attempts of read-write transactions that read before they
	// write (acquire, take over, renew, finish, unlock), aborted attempts
	// that the client retried included.
	rw int64
	// blind counts attempts of write-only read-write transactions, which
	// read nothing and so hold no lock before they commit (joining the
	// waiters' queue; aborted attempts that the client retried included),
	// and single-use commits (renewing an entry, dequeueing: one each,
	// whatever the client retried). Every read-write transaction attempt
	// is so counted once, in rw or blind.
	blind int64
	// reads counts lock-free snapshot reads.
	reads int64
}

// wakeUpCounts counts a Scope's wake-ups across processes, for tests.
// Counts are cumulative.
type wakeUpCounts struct {
	// sent counts datagrams its Unlocks sent to waiters of other
	// processes they handed the lock to.
	sent int64
	// received counts datagrams its listener received that named a
	// waiter of this Scope.
	received int64
}

// snapshot returns the counts so far.
func (s *storeStats) snapshot() opCounts {
	return opCounts{rw: s.rwAttempts.Load(), blind: s.blindWrites.Load(), reads: s.reads.Load()}
}

// ops returns the Spanner operations this Lock has made so far.
func (l *Lock) ops() opCounts {
	if l.sp == nil {
		return opCounts{}
	}
	return l.sp.stats.snapshot()
}

// wakeUps returns the Scope's wake-up counts.
func (s *Scope) wakeUps() wakeUpCounts {
	return wakeUpCounts{sent: s.sent.Load(), received: s.received.Load()}
}
