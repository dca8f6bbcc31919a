package cmdline

import (
	"flag"

	"github.com/spanmutex/spanmutex/ddl"
)

// AddDialectFlag adds --dialect, the SQL dialect of the schema a command
// prints or of the database it creates.
func AddDialectFlag(fs *flag.FlagSet) *string {
	return fs.String("dialect", ddl.GoogleSQL.String(), "the database's SQL dialect: googlesql or postgresql")
}

// ParseDialect parses the value of --dialect for command cmd (in full: "spanmutex ddl").
func ParseDialect(cmd, value string) (ddl.Dialect, error) {
	d, err := ddl.ParseDialect(value)
	if err != nil {
		return 0, Usagef(cmd, "--dialect: %v", err)
	}
	return d, nil
}
