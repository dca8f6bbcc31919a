-- Release 2 adds a column; IF NOT EXISTS lets a replica that takes over
-- from one that died after this DDL run the file again.
-- +goose NO TRANSACTION
-- +goose Up
-- +goose StatementBegin
ALTER TABLE Orders ADD COLUMN IF NOT EXISTS CreatedAt TIMESTAMP
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
ALTER TABLE Orders DROP COLUMN CreatedAt
-- +goose StatementEnd
