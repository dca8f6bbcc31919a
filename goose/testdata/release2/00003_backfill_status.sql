-- A backfill: Runs counts how many times it ran (the tests want 1).
-- +goose Up
UPDATE Orders SET Status = 'new' WHERE Status IS NULL;
UPDATE Backfills SET Runs = Runs + 1 WHERE Name = 'status';

-- +goose Down
UPDATE Orders SET Status = NULL WHERE TRUE;
