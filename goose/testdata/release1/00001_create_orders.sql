-- DDL runs outside transactions on Spanner: NO TRANSACTION, and one
-- StatementBegin/StatementEnd block, without a semicolon, per statement.
-- +goose NO TRANSACTION
-- +goose Up
-- +goose StatementBegin
CREATE TABLE Orders (
  OrderId INT64 NOT NULL,
  Status STRING(MAX),
) PRIMARY KEY (OrderId)
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TABLE Backfills (
  Name STRING(MAX) NOT NULL,
  Runs INT64 NOT NULL,
) PRIMARY KEY (Name)
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE Backfills
-- +goose StatementEnd
-- +goose StatementBegin
DROP TABLE Orders
-- +goose StatementEnd
