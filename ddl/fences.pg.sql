-- The highest fencing token each resource has accepted (spanmutex.Fence),
-- for a PostgreSQL-dialect database.
CREATE TABLE "Fences" (
  -- The guarded resource, e.g. "sheets/1234".
  "Resource" varchar(1024) NOT NULL,
  -- The lock or section whose tokens the resource accepts.
  "LockName" varchar(256) NOT NULL,
  -- The highest token accepted so far.
  "Token" bigint NOT NULL,
  -- When it was last accepted.
  "UpdatedAt" spanner.commit_timestamp NOT NULL,
  PRIMARY KEY ("Resource")
)
