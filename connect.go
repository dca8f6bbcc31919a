package spanmutex

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
)

// defaultEndpoint is where Spanner clients connect when SPANNER_EMULATOR_HOST
// is not set and no endpoint option was given.
const defaultEndpoint = "spanner.googleapis.com:443"

// emulatorHostEnv is read by the Spanner client library itself.
const emulatorHostEnv = "SPANNER_EMULATOR_HOST"

// probeDialTimeout bounds the connection attempt made to name the cause of
// an unreachable endpoint, after the call that failed.
const probeDialTimeout = 500 * time.Millisecond

// unreachableError says that Spanner could not be reached, where, and why,
// as far as a direct connection attempt to the endpoint can tell. It matches
// ErrUnreachable and, through Unwrap, the error that revealed it (such as
// ErrNotObtained and context.DeadlineExceeded).
type unreachableError struct {
	Database string // the client's database
	// Host is the host:port the client connects to: $SPANNER_EMULATOR_HOST,
	// or Cloud Spanner's default endpoint. A client made with its own
	// endpoint option is not seen here: Host then names the default.
	Host string
	// Cause is the reason in words: "connection refused", "DNS lookup
	// failed: ...", "TLS handshake failed: ...", "credentials rejected:
	// ...", or "the endpoint accepts connections but Spanner did not
	// answer" when nothing more precise was found.
	Cause string
	Err   error // the error of the call that failed
}

func (e *unreachableError) Error() string {
	where := e.Host
	if os.Getenv(emulatorHostEnv) == e.Host {
		where += " (" + emulatorHostEnv + ")"
	}
	msg := fmt.Sprintf("spanmutex: cannot reach Spanner at %s for database %s: %s", where, e.Database, e.Cause)
	switch {
	case errors.Is(e.Err, ErrNotObtained):
		msg += "; not obtained before ctx ended"
	case errors.Is(e.Err, context.DeadlineExceeded):
		msg += "; gave up at the deadline"
	}
	return msg
}

// Is reports whether target is ErrUnreachable.
func (e *unreachableError) Is(target error) bool { return target == ErrUnreachable }

// Unwrap returns the error of the call that failed.
func (e *unreachableError) Unwrap() error { return e.Err }

// notFoundError says that the database does not exist, or that its
// instance does not: Spanner answered, so the endpoint is reachable. It
// matches ErrNotFound.
type notFoundError struct {
	Database string // projects/P/instances/I/databases/D
	// Instance is set, to projects/P/instances/I, when the instance itself
	// does not exist; empty when only the database is missing.
	Instance string
	Err      error // Spanner's NotFound error
}

func (e *notFoundError) Error() string {
	if e.Instance != "" {
		return fmt.Sprintf("spanmutex: instance %s does not exist (the instance of database %s): check the instance id", e.Instance, e.Database)
	}
	return fmt.Sprintf("spanmutex: database %s does not exist (its instance does): create it, or check the database id", e.Database)
}

// Is reports whether target is ErrNotFound.
func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }

// Unwrap returns Spanner's error.
func (e *notFoundError) Unwrap() error { return e.Err }

// Ping makes one cheap query (SELECT 1) through client and returns nil if
// Spanner answered. Otherwise it returns an error matching ErrNotFound (the database or
// its instance does not exist), an error matching ErrUnreachable that names the host
// and the cause (connection refused, DNS, TLS, credentials) when Spanner
// could not be reached, or Spanner's error wrapped with the database name.
// If ctx ended first, the error matches ctx.Err() (context.Canceled or
// context.DeadlineExceeded). A cancelled ctx is never reported as an
// unreachable Spanner; a deadline is, as an error matching ErrUnreachable, when a
// direct connection attempt finds the endpoint out of reach, or when Spanner
// gave no answer for a second or more before it.
//
// Ping waits as long as ctx allows: the Spanner client keeps retrying an
// endpoint that does not answer, so give ctx a deadline of a few seconds.
// Call it once at start-up to fail fast; Run, Lock and the other calls
// wait for as long as their ctx allows instead, and do not distinguish a
// slow Spanner from an absent one before it has ended.
func Ping(ctx context.Context, client *spanner.Client) error {
	if ctx == nil {
		return errNilContext
	}
	if client == nil {
		return errNilClient("Ping")
	}
	began := time.Now()
	err := client.Single().Query(ctx, spanner.Statement{SQL: "SELECT 1"}).Do(func(*spanner.Row) error { return nil })
	if err == nil {
		return nil
	}
	db := client.DatabaseName()
	if nf := notFound(db, err); nf != nil {
		return nf
	}
	if ue := unanswered(ctx, db, fmt.Errorf("spanmutex: ping %s: %w", db, err), began); ue != nil {
		return ue
	}
	return fmt.Errorf("spanmutex: ping %s: %w", db, err)
}

// notFound returns an error matching ErrNotFound if err is Spanner's answer that the
// database db or its instance does not exist, and nil otherwise.
func notFound(db string, err error) *notFoundError {
	if spanner.ErrCode(err) != codes.NotFound {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "Database not found"):
		return &notFoundError{Database: db, Err: err}
	case strings.Contains(msg, "Instance not found"):
		inst := db
		if i := strings.Index(db, "/databases/"); i >= 0 {
			inst = db[:i]
		}
		return &notFoundError{Database: db, Instance: inst, Err: err}
	}
	return nil
}

// answered reports whether err is an answer from Spanner (so it was
// reached), as opposed to a call that never got one.
func answered(err error) bool {
	var se *schemaError
	var nf *notFoundError
	if errors.As(err, &se) || errors.As(err, &nf) || errors.Is(err, ErrInvalidConfig) {
		return true
	}
	switch spanner.ErrCode(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown,
		codes.Unauthenticated, codes.PermissionDenied:
		return false
	}
	return true
}

// unanswered explains err, the error of a call to database db made with
// ctx at local time began, or returns nil if err is an answer from
// Spanner:
//
//   - the caller cancelled ctx: err, made to match ctx.Err(), with no
//     probe of the endpoint (the caller stopped waiting; Spanner may be
//     fine);
//   - a direct connection attempt, or the credentials, show why Spanner
//     cannot be reached: an error matching ErrUnreachable (matching ctx.Err() too, if
//     ctx's deadline passed);
//   - ctx's deadline passed within a second of began, and the endpoint
//     accepts connections: err, made to match context.DeadlineExceeded:
//     so short a wait shows no more than a deadline that came first;
//   - otherwise an error matching ErrUnreachable saying that the endpoint accepts
//     connections but Spanner did not answer (matching ctx.Err() too).
func unanswered(ctx context.Context, db string, err error, began time.Time) error {
	if answered(err) {
		return nil
	}
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w: %w", err, ctx.Err())
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return err
	}
	ue := diagnose(db, err)
	if ctx.Err() != nil && ue.Cause == causeSilent && time.Since(began) < time.Second {
		return err
	}
	return ue
}

// causeSilent is the Cause of an unreachableError whose endpoint accepts
// connections.
const causeSilent = "the endpoint accepts connections but Spanner did not answer before the deadline"

// diagnose explains err, the error of a call to database db that got no
// answer from Spanner, as an error matching ErrUnreachable naming the endpoint and the
// cause. It tries one connection to the endpoint, for at most
// probeDialTimeout.
func diagnose(db string, err error) *unreachableError {
	host := os.Getenv(emulatorHostEnv)
	tlsToo := false
	if host == "" {
		host, tlsToo = defaultEndpoint, true
	}
	ue := &unreachableError{Database: db, Host: host, Err: err}
	switch code := spanner.ErrCode(err); code {
	case codes.Unauthenticated, codes.PermissionDenied:
		ue.Cause = "credentials rejected (" + code.String() + "): check Application Default Credentials and the account's Spanner roles"
		return ue
	}
	ue.Cause = dialCause(host, tlsToo)
	if ue.Cause == "" {
		ue.Cause = causeSilent
		if strings.Contains(err.Error(), "credentials") {
			ue.Cause = "no usable credentials: " + err.Error()
		}
	}
	return ue
}

// dialCause tries one connection to host (and a TLS handshake if tlsToo)
// and returns why it failed in words, or "" if it succeeded.
func dialCause(host string, tlsToo bool) string {
	d := net.Dialer{Timeout: probeDialTimeout}
	conn, err := d.Dial("tcp", host)
	if err != nil {
		var dnsErr *net.DNSError
		switch {
		case errors.As(err, &dnsErr):
			return "DNS lookup failed: " + dnsErr.Error()
		case errors.Is(err, syscall.ECONNREFUSED):
			return "connection refused (nothing listens there)"
		case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
			return "no route to the host: " + err.Error()
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Sprintf("no answer to a connection attempt within %v (a firewall, or a host that is down)", probeDialTimeout)
		}
		return "cannot connect: " + err.Error()
	}
	defer conn.Close()
	if !tlsToo {
		return ""
	}
	name, _, _ := net.SplitHostPort(host)
	tc := tls.Client(conn, &tls.Config{ServerName: name, MinVersion: tls.VersionTLS12})
	_ = tc.SetDeadline(time.Now().Add(probeDialTimeout))
	if err := tc.Handshake(); err != nil {
		return "TLS handshake failed: " + err.Error()
	}
	return ""
}
