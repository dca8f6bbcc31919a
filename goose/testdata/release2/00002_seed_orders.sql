-- DML runs in one read-write transaction: all or nothing.
-- +goose Up
INSERT INTO Orders (OrderId) VALUES (1), (2), (3);
INSERT INTO Backfills (Name, Runs) VALUES ('status', 0), ('refunds', 0);

-- +goose Down
DELETE FROM Backfills WHERE TRUE;
DELETE FROM Orders WHERE TRUE;
