-- +goose NO TRANSACTION
-- +goose Up
-- +goose StatementBegin
CREATE INDEX IF NOT EXISTS OrdersByStatus ON Orders (Status)
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP INDEX OrdersByStatus
-- +goose StatementEnd
