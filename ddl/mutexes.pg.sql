-- The table behind spanmutex, for a PostgreSQL-dialect database. One row per
-- named critical section. Identifiers are quoted so that they keep the same
-- mixed-case names as in GoogleSQL databases: spanmutex reads and writes
-- them by those names. Every timestamp is a Spanner commit timestamp:
-- ownership decisions compare them with CURRENT_TIMESTAMP inside the
-- deciding read-write transaction, never with a client's local clock.
CREATE TABLE "Mutexes" (
  -- The critical section's name, chosen by the caller (1-256 UTF-8 characters).
  "Name" varchar(256) NOT NULL,
  -- NEEDED, STARTED, DONE or FAILED.
  "State" varchar(16) NOT NULL,
  -- Who holds or last held the section: the Mutex's owner identity.
  "Owner" varchar(256),
  -- A random id of the acquisition that wrote Owner and Token, by which a
  -- commit whose outcome is unknown is resolved by reading it back.
  "LeaseID" varchar(36),
  -- The fencing token: +1 on every acquisition or takeover, never reused.
  "Token" bigint NOT NULL,
  -- How many times the section was started in this generation of the row.
  "Attempts" bigint NOT NULL,
  -- The error text of the last failed attempt, or why it was abandoned.
  "LastError" varchar,
  -- When the row was first written.
  "CreatedAt" spanner.commit_timestamp NOT NULL,
  -- When the current holder acquired it (STARTED) or the last holder did.
  "StartedAt" spanner.commit_timestamp,
  -- When the holder last proved it was alive; its lease is measured from here.
  "RenewedAt" spanner.commit_timestamp,
  -- The holder's declared lease, in microseconds (NULL in rows written
  -- before leases were declared: contenders then use their own lease).
  "LeaseMicros" bigint,
  -- When the section reached DONE or FAILED. Staleness is measured from here.
  "FinishedAt" spanner.commit_timestamp,
  -- When the row last changed.
  "UpdatedAt" spanner.commit_timestamp NOT NULL,
  -- The version (spanmutex.WithVersion, run --version) that last started the
  -- section: a row DONE at another version runs again. NULL when unused.
  "Version" varchar(256),
  -- For a reusable lock: TRUE once a waiter joined its queue, FALSE once a
  -- hand-off read the whole queue and left it empty (NULL: the queue is read).
  "Queued" boolean,
  -- For a Semaphore or RWLock (State SHARED): how many permits its holders
  -- may hold together. NULL for every other row.
  "Permits" bigint,
  -- The session ("SessionID" in the table <table>Sessions) whose renewals
  -- keep the holder live, besides the row's own "RenewedAt". NULL: the
  -- row's own renewals alone (rows written by a Scope without sessions, or
  -- by an earlier spanmutex).
  "Session" varchar(36),
  PRIMARY KEY ("Name")
)
