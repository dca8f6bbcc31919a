-- The request queue of package queue: one row per request, kept as history
-- once finished. Every timestamp is a Spanner commit timestamp.
CREATE TABLE Requests (
  -- The request's id: random (a UUID) from Enqueue, or derived from the
  -- change record it came from (capture), so that a replay is a no-op.
  RequestID STRING(64) NOT NULL,
  -- new, in-progress, complete or error.
  Status STRING(16) NOT NULL,
  -- create or update.
  Kind STRING(16) NOT NULL,
  -- The resource the request is about (the spreadsheet id): 1-200 characters.
  Resource STRING(200) NOT NULL,
  -- What the handler needs, opaque to the queue (at most 1 MiB by default).
  Payload BYTES(MAX),
  -- The claim: which worker's claim holds it while in-progress (and held it
  -- last, once finished).
  ProcessID STRING(64),
  -- The fencing token of the resource's lease under which it was claimed.
  Token INT64,
  -- How many times it was claimed.
  Attempts INT64 NOT NULL,
  -- Why it ended in error (or why its last claim was abandoned).
  LastError STRING(MAX),
  -- When it was enqueued: orders the queue (FIFO by commit order).
  CreatedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),
  -- CreatedAt while the request is new or in-progress, NULL once finished:
  -- the key of the pending index, so that scans never read the history.
  PendingSince TIMESTAMP OPTIONS (allow_commit_timestamp = true),
  -- When it was last claimed.
  ClaimedAt TIMESTAMP OPTIONS (allow_commit_timestamp = true),
  -- When it reached complete or error.
  FinishedAt TIMESTAMP OPTIONS (allow_commit_timestamp = true),
  -- The resource for a create, NULL for an update: the key of the unique
  -- index that allows at most one create per resource.
  CreateOf STRING(200) AS (IF(Kind = 'create', Resource, NULL)) STORED,
  -- From when a retention policy (ddl.RequestsRetention) may delete the
  -- request: FinishedAt, except for a completed create, which stays NULL
  -- (never deleted) because the queue reads it to know that the resource
  -- was created.
  ExpiresFrom TIMESTAMP OPTIONS (allow_commit_timestamp = true),
  CONSTRAINT RequestsStatusIsKnown CHECK (Status IN ('new', 'in-progress', 'complete', 'error')),
  CONSTRAINT RequestsKindIsKnown CHECK (Kind IN ('create', 'update')),
) PRIMARY KEY (RequestID)
