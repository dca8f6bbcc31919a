-- The checkpoints of package queue's change-stream capture: one row per
-- change stream partition (and one root row per stream, with an empty
-- token, for the initial query). Every row is written in the same
-- read-write transaction as the requests made from that partition's
-- changes, so that a checkpoint never runs ahead of, or behind, the queue.
CREATE TABLE CaptureCheckpoints (
  -- The change stream read.
  Stream STRING(128) NOT NULL,
  -- The partition token, as Spanner returned it in a child partitions
  -- record; the empty string for the root row (the initial query).
  PartitionToken STRING(MAX) NOT NULL,
  -- created (known, not yet read), running (being read) or finished
  -- (its child partitions are recorded and nothing more will come from it).
  State STRING(16) NOT NULL,
  -- The partitions whose child partitions record named this one. It is
  -- read only once every one of them is finished, so that the changes of
  -- one key are captured in commit order across splits and merges.
  ParentTokens ARRAY<STRING(MAX)> NOT NULL,
  -- The partition's start, from its child partitions record.
  StartTimestamp TIMESTAMP NOT NULL,
  -- Where reading resumes after a restart (the query's start_timestamp):
  -- every change committed before it has been captured. Changes at exactly
  -- this timestamp may be read again; their deterministic request ids make
  -- that a no-op.
  ResumeTimestamp TIMESTAMP NOT NULL,
  -- The capture instance reading the partition, NULL when none is.
  Owner STRING(64),
  -- When Owner last claimed or checkpointed it (Spanner commit timestamp).
  LeasedAt TIMESTAMP OPTIONS (allow_commit_timestamp = true),
  -- The lease Owner declared, in microseconds: nobody takes the partition
  -- over before it has passed since LeasedAt, by Spanner's clock. NULL in
  -- rows written before leases were declared: claimants then use their own.
  LeaseMicros INT64,
  -- Data change records read from the partition (a record read again
  -- after a restart counts again) and requests enqueued from them (a
  -- request found already enqueued is not counted again).
  Records INT64 NOT NULL,
  Requests INT64 NOT NULL,
  CreatedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),
  UpdatedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),
  FinishedAt TIMESTAMP OPTIONS (allow_commit_timestamp = true),
  CONSTRAINT CaptureCheckpointsStateIsKnown CHECK (State IN ('created', 'running', 'finished')),
) PRIMARY KEY (Stream, PartitionToken)
