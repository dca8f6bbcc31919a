-- The FIFO queue of waiters of a reusable lock (spanmutex.Lock). Joining is a
-- blind insert keyed by its own commit timestamp, so it contends with nobody;
-- Unlock hands the lock to the oldest live entry in the transaction that
-- releases it. The table is named after the mutex table with "Queue" appended.
CREATE TABLE MutexesQueue (
  -- The lock's name (the Name of its row in the mutex table).
  Name STRING(256) NOT NULL,
  -- When the waiter joined: its insert's commit timestamp. Orders the queue.
  EnqueuedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),
  -- A random id of this wait; it becomes the lease id when the lock is
  -- handed to the waiter.
  WaiterID STRING(36) NOT NULL,
  -- The waiter's owner identity.
  Owner STRING(256),
  -- When the waiter last proved it was alive.
  RenewedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),
  -- The waiter's lease, in microseconds, declared by the waiter: the lease it
  -- takes if the lock is handed to it, and the entry stays live for four
  -- of these after RenewedAt (it renews every two). NULL in entries written
  -- before leases were declared: readers then use their own lease.
  LeaseMicros INT64,
  -- Where the waiter's process listens for wake-ups (host:port, UDP), if it
  -- does: the Unlock that hands it the lock sends it a datagram after its
  -- commit, so that it reads the lock at once instead of at its next poll.
  WakeAddr STRING(64),
  -- For a Semaphore's or RWLock's entry: the permits it asks for (NULL in
  -- a Lock's entries). Added by 'spanmutex ddl --upgrade'.
  Permits INT64,
  -- For a Semaphore's or RWLock's entry: the fencing token it was granted
  -- with, NULL while it waits. A granted entry is a holder: it is live
  -- while RenewedAt plus its declared lease has not passed.
  Token INT64,
  -- The session of the waiter's Scope, if it has one (spanmutex.WithSessions):
  -- the session's renewals then count as the entry's, so the waiter writes
  -- nothing of its own while it waits. Added by 'spanmutex ddl --upgrade'.
  Session STRING(36),
) PRIMARY KEY (Name, EnqueuedAt, WaiterID)
