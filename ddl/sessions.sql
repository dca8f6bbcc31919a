-- The sessions of spanmutex Scopes: one row per session of a Scope, renewed
-- once per renewal interval however many locks the Scope holds. A lock row
-- whose Session names a session here is kept live by that session's
-- renewals (besides its own RenewedAt). The table is named after the mutex
-- table with "Sessions" appended. Every timestamp is a Spanner commit
-- timestamp: whether a session is live is decided by Spanner's clock
-- (CURRENT_TIMESTAMP() in the deciding transaction), never a client's.
-- The row deletion policy makes Spanner delete the sessions not renewed for
-- a day (in the background, typically within three days after that), so
-- that ended processes leave nothing behind; liveness never depends on the
-- deletion: a row still there is judged by RenewedAt and LeaseMicros.
CREATE TABLE MutexesSessions (
  -- A random id (UUID text) of one session of one Scope.
  SessionID STRING(36) NOT NULL,
  -- The owner identity of the session's process, for operators.
  Owner STRING(256),
  -- When the session was created.
  CreatedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),
  -- The commit timestamp of the session's last renewal: the session is live
  -- while RenewedAt plus LeaseMicros has not passed by Spanner's clock.
  RenewedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),
  -- The session's declared lease, in microseconds.
  LeaseMicros INT64 NOT NULL,
) PRIMARY KEY (SessionID),
  ROW DELETION POLICY (OLDER_THAN(RenewedAt, INTERVAL 1 DAY))
