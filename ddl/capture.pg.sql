-- The checkpoints of package queue's change-stream capture, for a
-- PostgreSQL-dialect database: one row per change stream partition (and one
-- root row per stream, with an empty token, for the initial query). Every
-- row is written in the same read-write transaction as the requests made
-- from that partition's changes.
CREATE TABLE "CaptureCheckpoints" (
  -- The change stream read.
  "Stream" varchar(128) NOT NULL,
  -- The partition token; the empty string for the root row.
  "PartitionToken" varchar NOT NULL,
  -- created, running or finished.
  "State" varchar(16) NOT NULL,
  -- The partitions whose child partitions record named this one.
  "ParentTokens" varchar[] NOT NULL,
  -- The partition's start, from its child partitions record.
  "StartTimestamp" timestamptz NOT NULL,
  -- Where reading resumes after a restart.
  "ResumeTimestamp" timestamptz NOT NULL,
  -- The capture instance reading the partition, NULL when none is.
  "Owner" varchar(64),
  -- When Owner last claimed or checkpointed it (Spanner commit timestamp).
  "LeasedAt" spanner.commit_timestamp,
  -- The lease Owner declared, in microseconds (NULL: not declared).
  "LeaseMicros" bigint,
  -- Data change records read from the partition, and requests enqueued.
  "Records" bigint NOT NULL,
  "Requests" bigint NOT NULL,
  "CreatedAt" spanner.commit_timestamp NOT NULL,
  "UpdatedAt" spanner.commit_timestamp NOT NULL,
  "FinishedAt" spanner.commit_timestamp,
  CONSTRAINT "CaptureCheckpointsStateIsKnown" CHECK ("State" IN ('created', 'running', 'finished')),
  PRIMARY KEY ("Stream", "PartitionToken")
)
