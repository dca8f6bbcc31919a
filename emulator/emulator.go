// Package emulator starts the real Cloud Spanner emulator for tests and demos,
// creates an instance and a database with the spanmutex schema, and hands
// back what a caller needs: the host, the database path and a client.
//
// It is meant for spanmutex's own tests and for the tests of code that uses
// spanmutex:
//
//	func TestMain(m *testing.M) {
//		os.Exit(emulator.RunTests(m, func(e *emulator.Emulator) { emu = e }))
//	}
//
// The contract:
//
//   - Start starts an emulator, or attaches to the one at
//     $SPANNER_EMULATOR_HOST (unless fault injection or WithBinary asks for
//     one of its own), creates the instance and a database holding
//     ddl.Statements plus WithDDL's statements, and opens a client. On error
//     nothing is left running, and the error says how to install the
//     emulator when no binary is found (ErrBinaryNotFound, FindBinary).
//   - NewDatabase gives each test a fresh database with a unique name;
//     UpdateDDL applies more schema to one.
//   - Close stops what Start started, and only that; it may be called more
//     than once.
//   - RunTests is a TestMain body: with -short it starts nothing and the
//     tests run without an emulator.
//
// The emulator runs one read-write transaction at a time and aborts the
// others; the Go client retries them, so contention tests work, with more
// aborts than production Spanner would show, and nothing measured on it
// says anything about production latency or cost.
package emulator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner"
	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	instance "cloud.google.com/go/spanner/admin/instance/apiv1"
	"cloud.google.com/go/spanner/admin/instance/apiv1/instancepb"
	"github.com/google/uuid"
	"google.golang.org/api/option"
	"google.golang.org/api/option/internaloption"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/spanmutex/spanmutex/ddl"
)

// Defaults for the names Start creates.
const (
	DefaultProject  = "spanmutex-test"
	DefaultInstance = "spanmutex"
	// DefaultStartTimeout bounds how long Start waits for a started emulator
	// to accept connections.
	DefaultStartTimeout = 30 * time.Second
)

// Emulator is a running Cloud Spanner emulator with one instance and a
// default database that holds the spanmutex schema. Its methods are safe for
// concurrent use. Close stops what Start started.
type Emulator struct {
	host     string
	project  string
	instance string
	database string
	client   *spanner.Client
	proc     *process // nil when attached to an emulator we did not start
	dbSeq    atomic.Int64
	runID    string
	dialect  ddl.Dialect // of the databases NewDatabase and CreateDatabase create

	closeOnce sync.Once
	closeErr  error
}

// Start starts an emulator (or attaches to $SPANNER_EMULATOR_HOST), creates
// the instance and a database with the spanmutex schema (plus any statements
// given with WithDDL), and opens a client to it. ctx bounds the start-up only.
// On error nothing is left running.
func Start(ctx context.Context, opts ...Option) (*Emulator, error) {
	cfg := defaultConfig()
	for _, opt := range opts {
		opt(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Emulator{project: cfg.project, instance: cfg.instance, runID: uuid.NewString()[:8], dialect: cfg.dialect}

	external := os.Getenv(HostEnv)
	if external != "" && !cfg.faultInjection && cfg.binary == "" {
		e.host = strings.TrimPrefix(strings.TrimPrefix(external, "http://"), "passthrough:///")
	} else {
		bin := cfg.binary
		if bin == "" {
			var err error
			if bin, err = FindBinary(); err != nil {
				return nil, err
			}
		}
		proc, err := startProcess(ctx, bin, cfg)
		if err != nil {
			return nil, err
		}
		e.proc = proc
		e.host = proc.host
	}

	if err := e.setUp(ctx, cfg); err != nil {
		return nil, errors.Join(err, e.Close())
	}
	return e, nil
}

func (e *Emulator) setUp(ctx context.Context, cfg config) error {
	if err := e.createInstanceOnceServing(ctx); err != nil {
		return err
	}
	db, err := e.NewDatabase(ctx, cfg.ddl...)
	if err != nil {
		return err
	}
	e.database = db
	e.client, err = e.NewClient(ctx, db)
	return err
}

// Host returns the emulator's host:port, the value for SPANNER_EMULATOR_HOST.
func (e *Emulator) Host() string { return e.host }

// Instance returns the instance path, projects/P/instances/I.
func (e *Emulator) Instance() string {
	return fmt.Sprintf("projects/%s/instances/%s", e.project, e.instance)
}

// Database returns the path of the default database created by Start,
// projects/P/instances/I/databases/D.
func (e *Emulator) Database() string { return e.database }

// Client returns a client of the default database. Close closes it.
func (e *Emulator) Client() *spanner.Client { return e.client }

// Started reports whether this Emulator started its own emulator process
// (false when it attached to $SPANNER_EMULATOR_HOST).
func (e *Emulator) Started() bool { return e.proc != nil }

// PID returns the process id of the emulator this Emulator started, or 0
// when it attached to one it did not start. Fault-injection tests use it to
// pause the emulator with SIGSTOP.
func (e *Emulator) PID() int {
	if e.proc == nil {
		return 0
	}
	return e.proc.cmd.Process.Pid
}

// Exited returns a channel that is closed when the emulator process this
// Emulator started exits for any reason but Close: killed, crashed, or
// exited by itself. It is nil, and never ready, when the Emulator attached
// to one it did not start. ExitError then says how it ended.
func (e *Emulator) Exited() <-chan struct{} {
	if e.proc == nil {
		return nil
	}
	return e.proc.died
}

// ExitError says, on one line, how the emulator process this Emulator
// started ended, once Exited is closed; nil while it runs, or if it was
// not started here.
func (e *Emulator) ExitError() error {
	if e.proc == nil {
		return nil
	}
	select {
	case <-e.proc.exited:
	default:
		return nil
	}
	return fmt.Errorf("emulator: %s (pid %d, %s) exited unexpectedly: %v",
		e.proc.cmd.Path, e.proc.cmd.Process.Pid, e.host, e.proc.cmd.ProcessState)
}

// ClientOptions returns the options that point a Spanner client (data or
// admin) at this emulator without touching the environment.
func (e *Emulator) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint("passthrough:///" + e.host),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithoutAuthentication(),
		internaloption.SkipDialSettingsValidation(),
	}
}

// NewClient opens a new client of database (a full database path), with its
// own connections, as a separate service instance would. The caller closes it.
// Extra options are appended, so a test can add gRPC interceptors.
func (e *Emulator) NewClient(ctx context.Context, database string, opts ...option.ClientOption) (*spanner.Client, error) {
	// No SessionPoolConfig: its fields are deprecated no-ops on the newest
	// clients (multiplexed sessions only).
	cfg := spanner.ClientConfig{DisableNativeMetrics: true}
	c, err := spanner.NewClientWithConfig(ctx, database, cfg, append(e.ClientOptions(), opts...)...)
	if err != nil {
		return nil, fmt.Errorf("emulator: open client of %s: %w", database, err)
	}
	return c, nil
}

// Dialect returns the dialect of the databases NewDatabase and
// CreateDatabase create (WithDialect; GoogleSQL by default).
func (e *Emulator) Dialect() ddl.Dialect { return e.dialect }

// NewDatabase creates a fresh database with a unique name, in the
// Emulator's dialect, holding the spanmutex schema followed by extra
// statements, and returns its path. Tests use one database per test to stay
// independent.
func (e *Emulator) NewDatabase(ctx context.Context, extra ...string) (string, error) {
	return e.NewDatabaseIn(ctx, e.dialect, extra...)
}

// NewDatabaseIn is NewDatabase in dialect d: extra statements are in d too.
func (e *Emulator) NewDatabaseIn(ctx context.Context, d ddl.Dialect, extra ...string) (string, error) {
	stmts, err := d.Statements(ddl.DefaultMutexTable)
	if err != nil {
		return "", err
	}
	return e.CreateDatabaseIn(ctx, d, append(stmts, extra...)...)
}

// CreateDatabase creates a fresh database with a unique name, in the
// Emulator's dialect, holding exactly the given statements (none: an empty
// database) and returns its path.
func (e *Emulator) CreateDatabase(ctx context.Context, statements ...string) (string, error) {
	return e.CreateDatabaseIn(ctx, e.dialect, statements...)
}

// CreateDatabaseIn is CreateDatabase in dialect d. A PostgreSQL database is
// created empty and then given the statements, as Spanner requires.
func (e *Emulator) CreateDatabaseIn(ctx context.Context, d ddl.Dialect, statements ...string) (string, error) {
	if !d.Valid() {
		return "", fmt.Errorf("emulator: invalid dialect %v", d)
	}
	admin, err := database.NewDatabaseAdminClient(ctx, e.ClientOptions()...)
	if err != nil {
		return "", fmt.Errorf("emulator: open database admin client: %w", err)
	}
	defer admin.Close()
	id := fmt.Sprintf("db-%s-%d", e.runID, e.dbSeq.Add(1))
	req := &databasepb.CreateDatabaseRequest{
		Parent:          e.Instance(),
		CreateStatement: "CREATE DATABASE `" + id + "`",
		ExtraStatements: statements,
	}
	if d == ddl.PostgreSQL {
		req.CreateStatement = `CREATE DATABASE "` + id + `"`
		req.DatabaseDialect = databasepb.DatabaseDialect_POSTGRESQL
		req.ExtraStatements = nil
	}
	op, err := admin.CreateDatabase(ctx, req)
	if err != nil {
		return "", fmt.Errorf("emulator: create database %s: %w", id, err)
	}
	db, err := op.Wait(ctx)
	if err != nil {
		return "", fmt.Errorf("emulator: create database %s: %w", id, err)
	}
	if d == ddl.PostgreSQL && len(statements) > 0 {
		if err := updateDDL(ctx, admin, db.GetName(), statements); err != nil {
			return "", err
		}
	}
	return db.GetName(), nil
}

// DropDatabase drops the database at path db. The emulator allows 100
// databases per instance: a test suite that makes one per test drops them
// as it goes.
func (e *Emulator) DropDatabase(ctx context.Context, db string) error {
	admin, err := database.NewDatabaseAdminClient(ctx, e.ClientOptions()...)
	if err != nil {
		return fmt.Errorf("emulator: open database admin client: %w", err)
	}
	defer admin.Close()
	if err := admin.DropDatabase(ctx, &databasepb.DropDatabaseRequest{Database: db}); err != nil {
		return fmt.Errorf("emulator: drop database %s: %w", db, err)
	}
	return nil
}

// UpdateDDL applies statements (CREATE, ALTER, DROP; no comments) to the
// database at path db and waits until they are done.
func (e *Emulator) UpdateDDL(ctx context.Context, db string, statements ...string) error {
	admin, err := database.NewDatabaseAdminClient(ctx, e.ClientOptions()...)
	if err != nil {
		return fmt.Errorf("emulator: open database admin client: %w", err)
	}
	defer admin.Close()
	return updateDDL(ctx, admin, db, statements)
}

// updateDDL is UpdateDDL with an admin client already open.
func updateDDL(ctx context.Context, admin *database.DatabaseAdminClient, db string, statements []string) error {
	op, err := admin.UpdateDatabaseDdl(ctx, &databasepb.UpdateDatabaseDdlRequest{Database: db, Statements: statements})
	if err != nil {
		return fmt.Errorf("emulator: update the schema of %s: %w", db, err)
	}
	if err := op.Wait(ctx); err != nil {
		return fmt.Errorf("emulator: update the schema of %s: %w", db, err)
	}
	return nil
}

// createInstanceOnceServing creates the instance, retrying for up to
// servingTimeout while the emulator answers UNAVAILABLE: a process just
// started accepts connections on its port before its gRPC server serves
// them ("error reading server preface: connection reset by peer").
func (e *Emulator) createInstanceOnceServing(ctx context.Context) error {
	deadline := time.Now().Add(servingTimeout)
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		err := e.createInstance(ctx)
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// servingTimeout bounds how long Start waits for a started emulator's
// gRPC server to serve, after its port accepts connections.
const servingTimeout = 15 * time.Second

func (e *Emulator) createInstance(ctx context.Context) error {
	admin, err := instance.NewInstanceAdminClient(ctx, e.ClientOptions()...)
	if err != nil {
		return fmt.Errorf("emulator: open instance admin client: %w", err)
	}
	defer admin.Close()
	op, err := admin.CreateInstance(ctx, &instancepb.CreateInstanceRequest{
		Parent:     "projects/" + e.project,
		InstanceId: e.instance,
		Instance: &instancepb.Instance{
			Config:      fmt.Sprintf("projects/%s/instanceConfigs/emulator-config", e.project),
			DisplayName: e.instance,
			NodeCount:   1,
		},
	})
	if status.Code(err) == codes.AlreadyExists {
		return nil
	}
	if err != nil {
		return fmt.Errorf("emulator: create instance %s at %s: %w", e.Instance(), e.host, err)
	}
	if _, err := op.Wait(ctx); err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("emulator: create instance %s at %s: %w", e.Instance(), e.host, err)
	}
	return nil
}

// Close closes the default client and stops the emulator if Start started
// it. It is safe to call more than once.
func (e *Emulator) Close() error {
	e.closeOnce.Do(func() {
		if e.client != nil {
			e.client.Close()
		}
		if e.proc != nil {
			e.closeErr = e.proc.stop()
		}
	})
	return e.closeErr
}

// waitForPort dials host until it accepts a connection, the process exits, or
// the deadline passes.
func waitForPort(ctx context.Context, host string, exited <-chan struct{}, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := net.DialTimeout("tcp", host, 100*time.Millisecond)
		if err == nil {
			return conn.Close()
		}
		select {
		case <-exited:
			return errors.New("emulator process exited before it accepted connections")
		case <-ctx.Done():
			return fmt.Errorf("emulator did not accept connections on %s: %w", host, ctx.Err())
		case <-tick.C:
		}
	}
}

// tailBuffer keeps the last bytes written to it: the emulator's log, shown
// when it fails to start.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if extra := t.buf.Len() - t.max; extra > 0 {
		t.buf.Next(extra)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

var _ io.Writer = (*tailBuffer)(nil)
