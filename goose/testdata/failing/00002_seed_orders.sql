-- +goose Up
INSERT INTO Orders (OrderId, Status) VALUES (1, 'new'), (2, 'new');
