-- One DDL batch (one schema change operation) of two statements; the
-- second fails when Spanner builds the index (two orders share a status),
-- after the first was applied.
-- +goose NO TRANSACTION
-- +goose Up
-- +goose StatementBegin
START BATCH DDL
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TABLE Refunds (RefundId INT64 NOT NULL) PRIMARY KEY (RefundId)
-- +goose StatementEnd
-- +goose StatementBegin
CREATE UNIQUE INDEX OrdersByStatus ON Orders (Status)
-- +goose StatementEnd
-- +goose StatementBegin
RUN BATCH
-- +goose StatementEnd
