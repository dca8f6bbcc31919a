-- The sessions of spanmutex Scopes, for a PostgreSQL-dialect database: one
-- row per session of a Scope, renewed once per renewal interval however
-- many locks the Scope holds. A lock row whose "Session" names a session
-- here is kept live by that session's renewals (besides its own
-- "RenewedAt"). Named after the mutex table with "Sessions" appended.
-- Whether a session is live is decided by Spanner's clock, never a
-- client's. The TTL makes Spanner delete the sessions not renewed for a day
-- (in the background), so that ended processes leave nothing behind;
-- liveness never depends on the deletion.
CREATE TABLE "MutexesSessions" (
  -- A random id (UUID text) of one session of one Scope.
  "SessionID" varchar(36) NOT NULL,
  -- The owner identity of the session's process, for operators.
  "Owner" varchar(256),
  -- When the session was created.
  "CreatedAt" spanner.commit_timestamp NOT NULL,
  -- The commit timestamp of the session's last renewal: the session is live
  -- while "RenewedAt" plus "LeaseMicros" has not passed by Spanner's clock.
  "RenewedAt" spanner.commit_timestamp NOT NULL,
  -- The session's declared lease, in microseconds.
  "LeaseMicros" bigint NOT NULL,
  PRIMARY KEY ("SessionID")
) TTL INTERVAL '1 day' ON "RenewedAt"
