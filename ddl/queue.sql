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
  -- When the waiter last proved it was alive. Entries older than the
  -- watermark are skipped by the hand-off.
  RenewedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),
) PRIMARY KEY (Name, EnqueuedAt, WaiterID)
