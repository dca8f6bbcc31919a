package cmdline

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
)

// DatabaseEnv names the environment variable that gives --database its
// default.
const DatabaseEnv = "SPANMUTEX_DATABASE"

// EmulatorHostEnv is read by the Spanner client library itself: when set,
// clients connect to the emulator there, without credentials.
const EmulatorHostEnv = "SPANNER_EMULATOR_HOST"

// DatabaseFlagUsage documents --database the same way everywhere.
const DatabaseFlagUsage = "the database, as projects/PROJECT/instances/INSTANCE/databases/DATABASE (default $" + DatabaseEnv + ")"

// The parts of a database path, as Cloud Spanner names them: a project id
// (optionally domain-scoped, "example.com:proj"), an instance id, a database id.
var (
	databasePath = regexp.MustCompile(`^projects/([^/]+)/instances/([^/]+)/databases/([^/]+)$`)
	projectID    = regexp.MustCompile(`^([a-z0-9.-]+:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
	instanceID   = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}[a-z0-9]$`)
	databaseID   = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,28}[a-z0-9]$`)
)

// AddDatabaseFlag defines --database on fs.
func AddDatabaseFlag(fs *flag.FlagSet) *string {
	return fs.String("database", "", DatabaseFlagUsage)
}

// ResolveDatabase returns the database path given with --database or, if the
// flag was not given, by $SPANMUTEX_DATABASE. Errors are usage errors that
// say how to set it.
func ResolveDatabase(cmd string, fs *flag.FlagSet, flagValue string) (string, error) {
	db, from := flagValue, "--database"
	if !FlagWasSet(fs, "database") {
		db, from = os.Getenv(DatabaseEnv), "$"+DatabaseEnv
	}
	if db == "" {
		return "", Usagef(cmd, "no database given: pass --database projects/PROJECT/instances/INSTANCE/databases/DATABASE "+
			"or export %s=projects/PROJECT/instances/INSTANCE/databases/DATABASE "+
			"(for a local emulator, 'spanmutex emulator' prints both lines to export)", DatabaseEnv)
	}
	if err := ValidateDatabasePath(db); err != nil {
		return "", Usagef(cmd, "%s %q is malformed: %v", from, db, err)
	}
	return db, nil
}

// OptionalDatabase resolves the database of a command that falls back to
// an embedded emulator: --database if given (an explicit "" asks for the
// emulator even when $SPANMUTEX_DATABASE is set), else $SPANMUTEX_DATABASE,
// else "" (the emulator). A malformed path is a usage error.
func OptionalDatabase(cmd string, fs *flag.FlagSet, flagValue string) (string, error) {
	if !FlagWasSet(fs, "database") && os.Getenv(DatabaseEnv) != "" {
		return ResolveDatabase(cmd, fs, flagValue)
	}
	if flagValue != "" {
		if err := ValidateDatabasePath(flagValue); err != nil {
			return "", Usagef(cmd, "--database %q is malformed: %v", flagValue, err)
		}
	}
	return flagValue, nil
}

// ParseDatabasePath splits db, a path as ValidateDatabasePath accepts, into
// its project, instance and database ids; ok is false if it is not one.
func ParseDatabasePath(db string) (project, instance, database string, ok bool) {
	m := databasePath.FindStringSubmatch(db)
	if m == nil {
		return "", "", "", false
	}
	return m[1], m[2], m[3], true
}

// ValidateDatabasePath checks db against Cloud Spanner's naming rules, so
// that a typo is reported before any connection is made.
func ValidateDatabasePath(db string) error {
	m := databasePath.FindStringSubmatch(db)
	if m == nil {
		return fmt.Errorf("want projects/PROJECT/instances/INSTANCE/databases/DATABASE")
	}
	switch {
	case !projectID.MatchString(m[1]):
		return fmt.Errorf("project id %q: want 6-30 lowercase letters, digits or hyphens, starting with a letter", m[1])
	case !instanceID.MatchString(m[2]):
		return fmt.Errorf("instance id %q: want 2-64 lowercase letters, digits or hyphens, starting with a letter", m[2])
	case !databaseID.MatchString(m[3]):
		return fmt.Errorf("database id %q: want 2-30 lowercase letters, digits, underscores or hyphens, starting with a letter", m[3])
	}
	return nil
}

// OpenClient opens a Spanner client of db and checks, within
// DefaultConnectTimeout, that Spanner answers. The client library connects
// to $SPANNER_EMULATOR_HOST by itself when it is set; otherwise it needs
// Application Default Credentials.
func OpenClient(ctx context.Context, db string, opts ...option.ClientOption) (*spanner.Client, error) {
	return OpenClientWithin(ctx, db, DefaultConnectTimeout, opts...)
}

// OpenClientWithin is OpenClient with the time allowed for the first answer
// from Spanner (--connect-timeout).
func OpenClientWithin(ctx context.Context, db string, connect time.Duration, opts ...option.ClientOption) (*spanner.Client, error) {
	// No SessionPoolConfig: clients from v1.88 have no session pool (its
	// fields are deprecated no-ops), and on older ones the zero value opens
	// sessions as they are needed, which suits a command's few transactions.
	cfg := spanner.ClientConfig{
		DisableNativeMetrics: true, // a short-lived command has no use for exported client metrics
	}
	c, err := spanner.NewClientWithConfig(ctx, db, cfg, opts...)
	if err != nil {
		return nil, fmt.Errorf("open a Spanner client of %s: %w (%s)", db, err, ConnectionHint())
	}
	if err := probe(ctx, c, connect); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// DefaultConnectTimeout is the default of --connect-timeout: how long a
// command waits for Spanner's first answer. The client library otherwise
// waits for a session for as long as it is let when nothing answers.
const DefaultConnectTimeout = 5 * time.Second

// ConnectTimeoutFlagUsage documents --connect-timeout the same way everywhere.
const ConnectTimeoutFlagUsage = "fail if Spanner has not answered a first query within this long, naming the host and the cause"

// AddConnectTimeoutFlag defines --connect-timeout on fs.
func AddConnectTimeoutFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("connect-timeout", DefaultConnectTimeout, ConnectTimeoutFlagUsage)
}

// CheckConnectTimeout refuses a --connect-timeout that is not positive.
func CheckConnectTimeout(cmd string, d time.Duration) error {
	if d <= 0 {
		return Usagef(cmd, "--connect-timeout %v: must be positive", d)
	}
	return nil
}

// probe pings Spanner within connect (spanmutex.Ping), so that a Spanner
// (or emulator) that does not answer, or a database or instance that does
// not exist, is reported at once, saying which, where and why, instead of
// as a wait that never ends. Other errors are left to the command, which
// explains them; so is everything once ctx itself has ended.
func probe(ctx context.Context, c *spanner.Client, connect time.Duration) error {
	pctx, cancel := context.WithTimeout(ctx, connect)
	defer cancel()
	err := spanmutex.Ping(pctx, c)
	if err == nil || ctx.Err() != nil {
		return nil
	}
	switch {
	case errors.Is(err, spanmutex.ErrUnreachable):
		return fmt.Errorf("%w (--connect-timeout %v)", err, connect)
	case errors.Is(err, spanmutex.ErrNotFound):
		return err
	}
	return nil
}

// ConnectionHint says where a client connects, for error messages.
func ConnectionHint() string {
	if host := os.Getenv(EmulatorHostEnv); host != "" {
		return "connecting to the emulator at " + EmulatorHostEnv + "=" + host
	}
	return strings.Join([]string{
		EmulatorHostEnv + " is not set, so this connects to Cloud Spanner with Application Default Credentials",
		"set " + EmulatorHostEnv + " to use an emulator",
	}, "; ")
}

// ValidateTable checks a --table value before anything connects.
func ValidateTable(cmd, table string) error {
	if err := ddl.ValidateTableName(table); err != nil {
		return Usagef(cmd, "--table: %v", strings.TrimPrefix(err.Error(), "ddl: "))
	}
	return nil
}

// ExplainConnection adds where the client connects to an error that may
// mean Spanner could not be reached at all.
func ExplainConnection(err error) error {
	if errors.Is(err, spanmutex.ErrUnreachable) || errors.Is(err, spanmutex.ErrNotFound) {
		return err // it says where and why already
	}
	switch spanner.ErrCode(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return fmt.Errorf("%w (is Spanner reachable? %s)", err, ConnectionHint())
	}
	return err
}
