-- Orders, and a table that counts how often each backfill ran.
CREATE TABLE Orders (
  OrderId INT64 NOT NULL,
  Amount  INT64,
) PRIMARY KEY (OrderId);

CREATE TABLE Backfills (
  Name STRING(64) NOT NULL,
  Runs INT64 NOT NULL,
) PRIMARY KEY (Name);
