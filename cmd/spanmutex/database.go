package main

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

// databaseEnv names the environment variable that gives --database its
// default.
const databaseEnv = "SPANMUTEX_DATABASE"

// emulatorHostEnv is read by the Spanner client library itself: when set,
// clients connect to the emulator there, without credentials.
const emulatorHostEnv = "SPANNER_EMULATOR_HOST"

// databaseFlagUsage documents --database the same way everywhere.
const databaseFlagUsage = "the database, as projects/PROJECT/instances/INSTANCE/databases/DATABASE (default $" + databaseEnv + ")"

// The parts of a database path, as Cloud Spanner names them: a project id
// (optionally domain-scoped, "example.com:proj"), an instance id, a database id.
var (
	databasePath = regexp.MustCompile(`^projects/([^/]+)/instances/([^/]+)/databases/([^/]+)$`)
	projectID    = regexp.MustCompile(`^([a-z0-9.-]+:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
	instanceID   = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}[a-z0-9]$`)
	databaseID   = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,28}[a-z0-9]$`)
)

// addDatabaseFlag defines --database on fs.
func addDatabaseFlag(fs *flag.FlagSet) *string {
	return fs.String("database", "", databaseFlagUsage)
}

// resolveDatabase returns the database path given with --database or, if the
// flag was not given, by $SPANMUTEX_DATABASE. Errors are usage errors that
// say how to set it.
func resolveDatabase(cmd string, fs *flag.FlagSet, flagValue string) (string, error) {
	db, from := flagValue, "--database"
	if !flagWasSet(fs, "database") {
		db, from = os.Getenv(databaseEnv), "$"+databaseEnv
	}
	if db == "" {
		return "", usagef(cmd, "no database given: pass --database projects/PROJECT/instances/INSTANCE/databases/DATABASE "+
			"or export %s=projects/PROJECT/instances/INSTANCE/databases/DATABASE "+
			"(for a local emulator, 'spanmutex emulator' prints both lines to export)", databaseEnv)
	}
	if err := validateDatabasePath(db); err != nil {
		return "", usagef(cmd, "%s %q is malformed: %v", from, db, err)
	}
	return db, nil
}

// optionalDatabase resolves the database of a command that falls back to
// an embedded emulator: --database if given (an explicit "" asks for the
// emulator even when $SPANMUTEX_DATABASE is set), else $SPANMUTEX_DATABASE,
// else "" (the emulator). A malformed path is a usage error.
func optionalDatabase(cmd string, fs *flag.FlagSet, flagValue string) (string, error) {
	if !flagWasSet(fs, "database") && os.Getenv(databaseEnv) != "" {
		return resolveDatabase(cmd, fs, flagValue)
	}
	if flagValue != "" {
		if err := validateDatabasePath(flagValue); err != nil {
			return "", usagef(cmd, "--database %q is malformed: %v", flagValue, err)
		}
	}
	return flagValue, nil
}

// validateDatabasePath checks db against Cloud Spanner's naming rules, so
// that a typo is reported before any connection is made.
func validateDatabasePath(db string) error {
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

// openClient opens a Spanner client of db and checks, within
// defaultConnectTimeout, that Spanner answers. The client library connects
// to $SPANNER_EMULATOR_HOST by itself when it is set; otherwise it needs
// Application Default Credentials.
func openClient(ctx context.Context, db string, opts ...option.ClientOption) (*spanner.Client, error) {
	return openClientWithin(ctx, db, defaultConnectTimeout, opts...)
}

// openClientWithin is openClient with the time allowed for the first answer
// from Spanner (--connect-timeout).
func openClientWithin(ctx context.Context, db string, connect time.Duration, opts ...option.ClientOption) (*spanner.Client, error) {
	cfg := spanner.ClientConfig{
		SessionPoolConfig:    spanner.DefaultSessionPoolConfig,
		DisableNativeMetrics: true, // a short-lived command has no use for exported client metrics
	}
	// A command runs a handful of transactions: do not open 100 sessions
	// up front.
	cfg.SessionPoolConfig.MinOpened = 1
	c, err := spanner.NewClientWithConfig(ctx, db, cfg, opts...)
	if err != nil {
		return nil, fmt.Errorf("open a Spanner client of %s: %w (%s)", db, err, connectionHint())
	}
	if err := probe(ctx, c, connect); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// defaultConnectTimeout is the default of --connect-timeout: how long a
// command waits for Spanner's first answer. The client library otherwise
// waits for a session for as long as it is let when nothing answers.
const defaultConnectTimeout = 5 * time.Second

// connectTimeoutFlagUsage documents --connect-timeout the same way everywhere.
const connectTimeoutFlagUsage = "fail if Spanner has not answered a first query within this long, naming the host and the cause"

// addConnectTimeoutFlag defines --connect-timeout on fs.
func addConnectTimeoutFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("connect-timeout", defaultConnectTimeout, connectTimeoutFlagUsage)
}

// badName is the usage error of cmd for a NAME that spanmutex.ValidateName
// refused with err.
func badName(cmd string, err error) *usageError {
	return &usageError{cmd: cmd, msg: "bad NAME: " + strings.TrimPrefix(err.Error(), spanmutex.ErrInvalidConfig.Error()+": ")}
}

// connectFor resolves the database of cmd (from --database or
// $SPANMUTEX_DATABASE), checks --table and --connect-timeout, and opens a
// client that has had a first answer within connect.
func connectFor(ctx context.Context, cmd string, fs *flag.FlagSet, database, table string, connect time.Duration) (*spanner.Client, error) {
	db, err := resolveDatabase(cmd, fs, database)
	if err == nil {
		err = validateTable(cmd, table)
	}
	if err == nil {
		err = checkConnectTimeout(cmd, connect)
	}
	if err != nil {
		return nil, err
	}
	return openClientWithin(ctx, db, connect)
}

// checkConnectTimeout refuses a --connect-timeout that is not positive.
func checkConnectTimeout(cmd string, d time.Duration) error {
	if d <= 0 {
		return usagef(cmd, "--connect-timeout %v: must be positive", d)
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

// connectionHint says where a client connects, for error messages.
func connectionHint() string {
	if host := os.Getenv(emulatorHostEnv); host != "" {
		return "connecting to the emulator at " + emulatorHostEnv + "=" + host
	}
	return strings.Join([]string{
		emulatorHostEnv + " is not set, so this connects to Cloud Spanner with Application Default Credentials",
		"set " + emulatorHostEnv + " to use an emulator",
	}, "; ")
}

// validateTable checks a --table value before anything connects.
func validateTable(cmd, table string) error {
	if err := ddl.ValidateTableName(table); err != nil {
		return usagef(cmd, "--table: %v", strings.TrimPrefix(err.Error(), "ddl: "))
	}
	return nil
}

// explainConnection adds where the client connects to an error that may
// mean Spanner could not be reached at all.
func explainConnection(err error) error {
	if errors.Is(err, spanmutex.ErrUnreachable) || errors.Is(err, spanmutex.ErrNotFound) {
		return err // it says where and why already
	}
	switch spanner.ErrCode(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return fmt.Errorf("%w (is Spanner reachable? %s)", err, connectionHint())
	}
	return err
}
