-- spanmutex:dml
-- The backfill: every order gets a status; the counter shows how often it ran.
UPDATE Orders SET Status = 'NEW' WHERE Status IS NULL;
UPDATE Backfills SET Runs = Runs + 1 WHERE Name = 'status';
