-- The table behind spanmutex. One row per named critical section.
-- Every timestamp is a Spanner commit timestamp: ownership decisions compare
-- them with CURRENT_TIMESTAMP() inside the deciding read-write transaction,
-- never with a client's local clock.
CREATE TABLE Mutexes (
  -- The critical section's name, chosen by the caller (1-256 UTF-8 characters).
  Name STRING(256) NOT NULL,
  -- NEEDED, STARTED, DONE or FAILED.
  State STRING(16) NOT NULL,
  -- Who holds or last held the section: the Mutex's owner identity.
  Owner STRING(256),
  -- A random id of the acquisition that wrote Owner and Token. It tells two
  -- acquisitions apart even when they share an owner identity, so that a commit
  -- whose outcome is unknown is resolved by reading it back.
  LeaseID STRING(36),
  -- The fencing token: +1 on every acquisition or takeover, never reused.
  Token INT64 NOT NULL,
  -- How many times the section was started in this generation of the row
  -- (a generation starts when the row is created or its DONE/FAILED goes stale).
  Attempts INT64 NOT NULL,
  -- The error text of the last failed attempt, or why it was abandoned.
  LastError STRING(MAX),
  -- When the row was first written.
  CreatedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),
  -- When the current holder acquired it (STARTED) or the last holder did.
  StartedAt TIMESTAMP OPTIONS (allow_commit_timestamp = true),
  -- When the holder last proved it was alive: set on acquisition and on every
  -- lease renewal. The holder's lease is measured from here.
  RenewedAt TIMESTAMP OPTIONS (allow_commit_timestamp = true),
  -- The holder's lease, in microseconds, declared by the holder when it
  -- acquired: it renews within it, and nobody takes over before RenewedAt
  -- plus this by Spanner's clock, whatever their own configuration. NULL in
  -- rows written by spanmutex before it declared leases: contenders then use
  -- their own lease.
  LeaseMicros INT64,
  -- When the section reached DONE or FAILED. Staleness is measured from here.
  FinishedAt TIMESTAMP OPTIONS (allow_commit_timestamp = true),
  -- When the row last changed.
  UpdatedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),
  -- The version (spanmutex.WithVersion, run --version) that last started the
  -- section: a row DONE at another version runs again. NULL when unused.
  -- Added after the first release: 'spanmutex ddl --alter' adds it to a table
  -- created before.
  Version STRING(256),
  -- For a reusable lock: TRUE once a waiter joined its queue (the table
  -- <table>Queue), FALSE once a hand-off read the whole queue and left it
  -- empty, so that an uncontended Lock and Unlock need not read the queue.
  -- NULL in rows written before it was added ('spanmutex ddl --upgrade'),
  -- and by run-once sections: the queue is then read.
  Queued BOOL,
  -- For a Semaphore or RWLock (State SHARED): how many permits its holders
  -- may hold together, stored by its first contender; contenders declaring
  -- another size are refused. NULL for every other row. Added by
  -- 'spanmutex ddl --upgrade'.
  Permits INT64,
  -- The session (SessionID in the table <table>Sessions) whose renewals
  -- keep the holder live, besides the row's own RenewedAt. NULL: the row's
  -- own renewals alone (rows written by a Scope without sessions, or by an
  -- earlier spanmutex).
  -- Added by 'spanmutex ddl --upgrade'.
  Session STRING(36),
) PRIMARY KEY (Name)
