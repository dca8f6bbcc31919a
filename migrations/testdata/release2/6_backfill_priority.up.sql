-- spanmutex:dml
UPDATE Orders SET Priority = IF(Amount > 200, 1, 0) WHERE Priority IS NULL;
UPDATE Backfills SET Runs = Runs + 1 WHERE Name = 'priority';
