package migrations

import (
	"regexp"
	"strings"
)

// DMLMarker, as the first non-blank line of a migration file, marks the
// file as DML (INSERT, UPDATE, DELETE: a backfill) rather than DDL. Its
// statements, separated by semicolons, run in one read-write transaction:
// all of them apply or none does. Upstream's spanner driver sends every file
// to the DDL API, where DML fails.
//
//	-- spanmutex:dml
//	UPDATE Orders SET Status = 'NEW' WHERE Status IS NULL;
const DMLMarker = "-- spanmutex:dml"

// identifier is what Spanner accepts as an unquoted table name.
var identifier = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,127}$`)

// isDML reports whether a migration file starts with DMLMarker.
func isDML(body string) bool {
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		return strings.EqualFold(line, DMLMarker)
	}
	return false
}

// splitStatements splits SQL text at the semicolons that end statements,
// leaving out comments and empty statements. It knows quoted strings and
// identifiers ('...', "...", `...`, and their triple-quoted forms), -- and #
// line comments and /* */ block comments, so that a semicolon inside them
// does not split.
func splitStatements(sql string) []string {
	var (
		out []string
		cur strings.Builder
	)
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case c == ';':
			flush()
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-', c == '#':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
			cur.WriteByte('\n')
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				i = len(sql)
			} else {
				i += 2 + end + 1
			}
			cur.WriteByte(' ')
		case c == '\'' || c == '"' || c == '`':
			quote := string(c)
			if strings.HasPrefix(sql[i:], quote+quote+quote) && c != '`' {
				quote = quote + quote + quote
			}
			j := i + len(quote)
			for j < len(sql) {
				if sql[j] == '\\' {
					j += 2
					continue
				}
				if strings.HasPrefix(sql[j:], quote) {
					break
				}
				j++
			}
			end := min(j+len(quote), len(sql))
			cur.WriteString(sql[i:end])
			i = end - 1
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return out
}

// isConcurrentSchemaChange reports whether err is Spanner rejecting a schema
// change because another schema change or a read-write transaction is in
// progress: nothing was applied, and the same DDL may be sent again. The
// emulator answers so when a waiter's transaction is under way as the
// holder's DDL starts.
func isConcurrentSchemaChange(err error) bool {
	if err == nil {
		return false
	}
	// The operation's error comes back as a status through the long-running
	// operation, not always with a gRPC code the client recognises: match
	// the text Spanner sends.
	msg := err.Error()
	return strings.Contains(msg, "concurrent schema change") || strings.Contains(msg, "Schema change operation rejected")
}
