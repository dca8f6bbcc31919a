-- The request queue of package queue, for a PostgreSQL-dialect database:
-- one row per request, kept as history once finished. Every timestamp is a
-- Spanner commit timestamp.
CREATE TABLE "Requests" (
  -- The request's id: random (a UUID) from Enqueue.
  "RequestID" varchar(64) NOT NULL,
  -- new, in-progress, complete or error.
  "Status" varchar(16) NOT NULL,
  -- create or update.
  "Kind" varchar(16) NOT NULL,
  -- The resource the request is about: 1-200 characters.
  "Resource" varchar(200) NOT NULL,
  -- What the handler needs, opaque to the queue.
  "Payload" bytea,
  -- Which worker's claim holds it while in-progress (and held it last).
  "ProcessID" varchar(64),
  -- The fencing token of the resource's lease under which it was claimed.
  "Token" bigint,
  -- How many times it was claimed.
  "Attempts" bigint NOT NULL,
  -- Why it ended in error (or why its last claim was abandoned).
  "LastError" varchar,
  -- When it was enqueued: orders the queue (FIFO by commit order).
  "CreatedAt" spanner.commit_timestamp NOT NULL,
  -- CreatedAt while the request is new or in-progress, NULL once finished.
  "PendingSince" spanner.commit_timestamp,
  -- When it was last claimed.
  "ClaimedAt" spanner.commit_timestamp,
  -- When it reached complete or error.
  "FinishedAt" spanner.commit_timestamp,
  -- The resource for a create, NULL for an update: the key of the unique
  -- index that allows at most one create per resource.
  "CreateOf" varchar(200) GENERATED ALWAYS AS (CASE WHEN "Kind" = 'create' THEN "Resource" ELSE NULL END) STORED,
  -- From when a retention policy (TTL) may delete the request.
  "ExpiresFrom" spanner.commit_timestamp,
  CONSTRAINT "RequestsStatusIsKnown" CHECK ("Status" IN ('new', 'in-progress', 'complete', 'error')),
  CONSTRAINT "RequestsKindIsKnown" CHECK ("Kind" IN ('create', 'update')),
  PRIMARY KEY ("RequestID")
)
