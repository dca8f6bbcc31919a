package ddl

import (
	_ "embed"
	"fmt"
	"strings"
)

// DefaultCaptureTable is the checkpoint table of package queue's
// change-stream capture when none is configured.
const DefaultCaptureTable = "CaptureCheckpoints"

//go:embed capture.sql
var captureSQL string

// CaptureTable returns the CREATE TABLE statement, with comments, of the
// checkpoint table of package queue's change-stream capture, named table:
// one row per (stream, partition token) with the partition's state, parents,
// resume timestamp and owner.
func CaptureTable(table string) (string, error) {
	if err := ValidateTableName(table); err != nil {
		return "", err
	}
	out := captureSQL
	for _, old := range []string{"CREATE TABLE " + DefaultCaptureTable + " (", "CONSTRAINT " + DefaultCaptureTable + "StateIsKnown"} {
		out = strings.Replace(out, old, strings.Replace(old, DefaultCaptureTable, table, 1), 1)
	}
	return out, nil
}

// CaptureStatements is CaptureTable with comments stripped, as a list ready
// for UpdateDatabaseDdl or CreateDatabase's ExtraStatements.
func CaptureStatements(table string) ([]string, error) {
	return GoogleSQL.CaptureStatements(table)
}

// CaptureUpgrade returns the statements that bring a checkpoint table named
// table, made by an earlier spanmutex, up to this schema: LeaseMicros, where
// a partition's owner declares its lease. Capture.Run refuses a table
// without it. Rows already there keep working: one without a declaration is
// judged by each claimant's own lease.
func CaptureUpgrade(table string) ([]string, error) {
	if err := ValidateTableName(table); err != nil {
		return nil, err
	}
	return []string{"ALTER TABLE " + table + " ADD COLUMN LeaseMicros INT64"}, nil
}

// ChangeStream returns the statement that creates the change stream named
// stream over tables (all their columns), for the capture to read:
//
//	CREATE CHANGE STREAM stream FOR T1, T2
//
// Names are validated as table names. Spanner keeps a stream's records for
// its retention period (one day unless an OPTIONS clause says otherwise): a
// capture stopped for longer loses changes, and its Run says so.
func ChangeStream(stream string, tables ...string) (string, error) {
	if err := ValidateTableName(stream); err != nil {
		return "", fmt.Errorf("ddl: change stream: %w", err)
	}
	if len(tables) == 0 {
		return "", fmt.Errorf("ddl: change stream %s: name at least one table to watch", stream)
	}
	seen := map[string]bool{}
	for _, t := range tables {
		if err := ValidateTableName(t); err != nil {
			return "", fmt.Errorf("ddl: change stream %s: %w", stream, err)
		}
		if seen[strings.ToLower(t)] {
			return "", fmt.Errorf("ddl: change stream %s: table %s is named twice", stream, t)
		}
		seen[strings.ToLower(t)] = true
	}
	return fmt.Sprintf("CREATE CHANGE STREAM %s FOR %s", stream, strings.Join(tables, ", ")), nil
}
