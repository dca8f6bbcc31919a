-- The highest fencing token each resource has accepted (spanmutex.Fence).
CREATE TABLE Fences (
  -- The guarded resource, e.g. "sheets/1234".
  Resource STRING(1024) NOT NULL,
  -- The lock or section whose tokens the resource accepts. Tokens of
  -- different names are not comparable, so a resource accepts one name only.
  LockName STRING(256) NOT NULL,
  -- The highest token accepted so far.
  Token INT64 NOT NULL,
  -- When it was last accepted.
  UpdatedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),
) PRIMARY KEY (Resource)
