-- The FIFO queue of waiters of a reusable lock (spanmutex.Lock), for a
-- PostgreSQL-dialect database. Joining is a blind insert keyed by its own
-- commit timestamp; Unlock hands the lock to the oldest live entry in the
-- transaction that releases it. Named after the mutex table with "Queue"
-- appended.
CREATE TABLE "MutexesQueue" (
  -- The lock's name (the Name of its row in the mutex table).
  "Name" varchar(256) NOT NULL,
  -- When the waiter joined: its insert's commit timestamp. Orders the queue.
  "EnqueuedAt" spanner.commit_timestamp NOT NULL,
  -- A random id of this wait; it becomes the lease id when the lock is
  -- handed to the waiter.
  "WaiterID" varchar(36) NOT NULL,
  -- The waiter's owner identity.
  "Owner" varchar(256),
  -- When the waiter last proved it was alive.
  "RenewedAt" spanner.commit_timestamp NOT NULL,
  -- The waiter's declared lease, in microseconds: the entry stays live for
  -- four of these after RenewedAt (it renews every two).
  "LeaseMicros" bigint,
  -- Where the waiter's process listens for wake-ups (host:port, UDP), if it does.
  "WakeAddr" varchar(64),
  -- A Semaphore's entry: the permits it asks for (NULL in a Lock's).
  "Permits" bigint,
  -- A Semaphore's entry: its fencing token once granted, NULL while it waits.
  "Token" bigint,
  -- The session of the waiter's Scope, if it has one: its renewals count as
  -- the entry's.
  "Session" varchar(36),
  PRIMARY KEY ("Name", "EnqueuedAt", "WaiterID")
)
