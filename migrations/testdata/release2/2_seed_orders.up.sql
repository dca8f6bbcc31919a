-- spanmutex:dml
-- Some orders written before Status existed.
INSERT INTO Orders (OrderId, Amount) VALUES (1, 100), (2, 250), (3, 75);
INSERT INTO Backfills (Name, Runs) VALUES ('status', 0), ('priority', 0);
