-- +goose NO TRANSACTION
-- +goose Up
-- +goose StatementBegin
CREATE TABLE Orders (OrderId INT64 NOT NULL, Status STRING(MAX)) PRIMARY KEY (OrderId)
-- +goose StatementEnd
