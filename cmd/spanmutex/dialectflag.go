package main

import (
	"flag"

	"github.com/spanmutex/spanmutex/ddl"
)

// addDialectFlag adds --dialect, the SQL dialect of the schema a command
// prints or the database it creates.
func addDialectFlag(fs *flag.FlagSet) *string {
	return fs.String("dialect", ddl.GoogleSQL.String(), "the database's SQL dialect: googlesql or postgresql")
}

// parseDialectFlag parses the value of --dialect for command cmd.
func parseDialectFlag(cmd, value string) (ddl.Dialect, error) {
	d, err := ddl.ParseDialect(value)
	if err != nil {
		return 0, &usageError{cmd: cmd, msg: "--dialect: " + err.Error()}
	}
	return d, nil
}
