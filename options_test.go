package spanmutex

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every bad input to New is an error wrapping ErrInvalidConfig that names
// the problem; none panics.
func TestNewRejectsBadInput(t *testing.T) {
	client := &spanner.Client{} // never used: New does no I/O
	tests := []struct {
		name    string
		section string
		opts    []MutexOption
		want    string
	}{
		{"empty name", "", nil, "name is empty"},
		{"oversized name", strings.Repeat("x", 257), nil, "257 characters long"},
		{"non-UTF-8 name", "bad\xffname", nil, "not valid UTF-8"},
		{"control character in name", "a\x00b", nil, "control character"},
		{"newline in name", "a\nb", nil, "control character"},
		{"name of spaces only", "   ", nil, "starts or ends with white space"},
		{"name with a leading space", " lead", nil, "starts or ends with white space"},
		{"name with a trailing space", "lead ", nil, "starts or ends with white space"},
		{"name with an inner space", "lead er", nil, ""},
		{"empty table", "s", []MutexOption{WithTable("")}, "invalid table name"},
		{"table with a dash", "s", []MutexOption{WithTable("my-table")}, "invalid table name"},
		{"table with SQL", "s", []MutexOption{WithTable("T; DROP TABLE X")}, "invalid table name"},
		{"empty owner", "s", []MutexOption{WithOwner("")}, ""}, // empty means default: valid
		{"oversized owner", "s", []MutexOption{WithOwner(strings.Repeat("o", 300))}, "owner is 300 characters"},
		{"oversized version", "s", []MutexOption{WithVersion(strings.Repeat("v", 300))}, "WithVersion: version is 300 characters"},
		{"version with a control character", "s", []MutexOption{WithVersion("v1\n")}, "WithVersion: version"},
		{"non-UTF-8 owner", "s", []MutexOption{WithOwner("\xfe")}, "owner"},
		{"zero lease", "s", []MutexOption{WithLease(0)}, "lease must be at least 100ms"},
		{"negative lease", "s", []MutexOption{WithLease(-time.Second)}, "lease must be at least 100ms"},
		{"a lease too short to renew in", "s", []MutexOption{WithLease(time.Nanosecond)}, "lease must be at least 100ms"},
		{"the shortest lease", "s", []MutexOption{WithLease(minLease)}, ""},
		{"the longest lease", "s", []MutexOption{WithLease(maxLease)}, ""},
		{"a lease above maxLease", "s", []MutexOption{WithLease(100000 * time.Hour)}, "WithLease(100000h0m0s): the lease must be at most 1h0m0s"},
		{"renewals less often than twice a lease", "s", []MutexOption{WithLease(time.Second), WithRenewInterval(600 * time.Millisecond)}, "at most half the lease"},
		{"renewals twice a lease", "s", []MutexOption{WithLease(time.Second), WithRenewInterval(500 * time.Millisecond)}, ""},
		{"renewals every nanosecond", "s", []MutexOption{WithRenewInterval(time.Nanosecond)}, "must be at least 10ms"},
		{"a scope on a run-once Mutex (its wake-ups)", "s", []MutexOption{WithScope(NewScope())}, ""},
		{"staleness equal to lease", "s", []MutexOption{WithLease(time.Minute), WithStaleness(time.Minute)}, "above the lease"},
		{"staleness below lease", "s", []MutexOption{WithLease(time.Minute), WithStaleness(time.Second)}, "above the lease"},
		{"negative staleness", "s", []MutexOption{WithStaleness(-time.Hour)}, "above the lease"},
		{"zero attempts", "s", []MutexOption{WithMaxAttempts(0)}, "at least 1 attempt"},
		{"negative attempts", "s", []MutexOption{WithMaxAttempts(-3)}, "at least 1 attempt"},
		{"zero failures", "s", []MutexOption{WithMaxFailures(0)}, "WithMaxFailures(0): at least 1"},
		{"jitter 1", "s", []MutexOption{WithJitter(1)}, "[0, 1)"},
		{"negative jitter", "s", []MutexOption{WithJitter(-0.1)}, "[0, 1)"},
		{"NaN jitter", "s", []MutexOption{WithJitter(math.NaN())}, "[0, 1)"},
		{"nil backoff", "s", []MutexOption{WithBackOff(nil)}, "WithBackOff(nil)"},
		{"nil logger", "s", []MutexOption{WithLogger(nil)}, "WithLogger(nil)"},
		{"zero finish timeout", "s", []MutexOption{WithFinishTimeout(0)}, "WithFinishTimeout"},
		{"nil option", "s", []MutexOption{nil}, "option 0 is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(client, tt.section, tt.opts...)
			if tt.want == "" {
				require.NoError(t, err)
				assert.NotEmpty(t, m.cfg.owner)
				return
			}
			require.Error(t, err)
			assert.Nil(t, m)
			assert.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestNewRejectsNilClient(t *testing.T) {
	m, err := New(nil, "s")
	assert.Nil(t, m)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "nil *spanner.Client")
}

func TestNewAcceptsGoodInput(t *testing.T) {
	m, err := New(&spanner.Client{}, "migrations/2030-01-01 add index ✓",
		WithTable("My_Locks2"), WithOwner("svc-a"), WithLease(time.Second),
		WithStaleness(2*time.Second), WithMaxAttempts(1), WithJitter(0.99),
		WithBackOff(func() backoff.BackOff { return &backoff.ZeroBackOff{} }))
	require.NoError(t, err)
	assert.Equal(t, "svc-a", m.cfg.owner)
	assert.Equal(t, "migrations/2030-01-01 add index ✓", m.name)
	longest := strings.Repeat("é", maxNameLength) // 256 characters, 512 bytes
	_, err = New(&spanner.Client{}, longest)
	assert.NoError(t, err)
}

func TestDefaultOwnersDiffer(t *testing.T) {
	a, err := New(&spanner.Client{}, "s")
	require.NoError(t, err)
	b, err := New(&spanner.Client{}, "s")
	require.NoError(t, err)
	assert.NotEqual(t, a.cfg.owner, b.cfg.owner)
}

func TestRunRejectsNilArguments(t *testing.T) {
	m, err := New(&spanner.Client{}, "s")
	require.NoError(t, err)
	//lint:ignore SA1012 checking that a nil context is refused, not panicked on
	out, err := m.Run(nil, func(context.Context, *Lease) error { return nil }) //nolint:staticcheck
	assert.Equal(t, NoOutcome, out)
	assert.ErrorContains(t, err, "nil context")
	out, err = m.Run(context.Background(), nil)
	assert.Equal(t, NoOutcome, out)
	assert.ErrorContains(t, err, "nil section function")
}

func TestErrorsMatchTheirSentinels(t *testing.T) {
	cause := errors.New("disk full")
	assert.ErrorIs(t, &exhaustedError{Name: "n", Err: cause}, ErrAttemptsExhausted)
	assert.ErrorIs(t, &exhaustedError{Name: "n", Err: cause}, cause)
	assert.ErrorIs(t, &leaseLostError{Name: "n"}, ErrLeaseLost)
	assert.ErrorIs(t, &schemaError{Table: "T"}, ErrSchema)
	assert.ErrorIs(t, &SectionError{Name: "n", Err: cause}, cause)
	assert.Contains(t, (&schemaError{Table: "T", Problem: "does not exist"}).Error(), "spanmutex ddl --table T")
	assert.Contains(t, (&exhaustedError{Name: "n", Attempts: 3, MaxAttempts: 3, LastError: "boom"}).Error(), "gave up after 3 of 3 attempts: last error: boom")
	assert.NotErrorIs(t, &exhaustedError{Name: "n"}, ErrOutage)
	outage := &outageError{Name: "n", Failures: 3, MaxFailures: 3, Err: cause}
	assert.ErrorIs(t, outage, ErrOutage)
	assert.ErrorIs(t, outage, ErrAttemptsExhausted, "as before outageError existed")
	assert.ErrorIs(t, outage, cause)
	assert.Equal(t, `spanmutex: "n": Spanner kept failing: 3 calls in a row failed (at most 3 allowed): last error: disk full`, outage.Error())
	assert.Contains(t, (&outageError{Name: "n", Failures: 1, MaxFailures: 3, BackOffStopped: true}).Error(), "the backoff policy stopped the retries after 1 failed calls in a row")
}

func TestOutcomeStrings(t *testing.T) {
	assert.Equal(t, "Executed", Executed.String())
	assert.Equal(t, "AlreadyDone", AlreadyDone.String())
	assert.Equal(t, "NotNeeded", NotNeeded.String())
	assert.Equal(t, "NoOutcome", NoOutcome.String())
}

func TestTruncateKeepsUTF8(t *testing.T) {
	s := strings.Repeat("é", 10) // 20 bytes
	got := truncate(s, 5)
	assert.Equal(t, "éé…", got)
	assert.Equal(t, "short", truncate("short", 10))
}

// Each option compiles where it applies and nowhere else: the table says,
// per option, which constructors take it, and is checked against the
// constructors' signatures (a variadic parameter of an option interface)
// and the options' result types.
func TestOptionsCompileWhereTheyApply(t *testing.T) {
	takes := map[string]reflect.Type{ // constructor: the type of its options
		"New":         optionParam(New),
		"NewLock":     optionParam(NewLock),
		"NewElection": optionParam(NewElection),
		"Inspect":     optionParam(Inspect),
		"NewFence":    optionParam(NewFence),
	}
	const (
		mutexOnly = "New"
		lockToo   = "New NewLock"
		holders   = "New NewLock NewElection"
		all       = "New NewLock NewElection Inspect NewFence"
	)
	for _, tt := range []struct {
		name   string
		result any // the option constructor
		where  string
	}{
		{"WithTable", WithTable, all},
		{"WithDialect", WithDialect, all},
		{"WithOwner", WithOwner, lockToo},
		{"WithScope", WithScope, holders},
		{"WithLease", WithLease, holders},
		{"WithJitter", WithJitter, holders},
		{"WithBackOff", WithBackOff, holders},
		{"WithLogger", WithLogger, holders},
		{"WithRenewInterval", WithRenewInterval, holders},
		{"WithFinishTimeout", WithFinishTimeout, holders},
		{"WithMaxFailures", WithMaxFailures, holders},
		{"WithTracerProvider", WithTracerProvider, holders},
		{"WithMeterProvider", WithMeterProvider, holders},
		{"WithStaleness", WithStaleness, mutexOnly},
		{"WithNeeded", WithNeeded, mutexOnly},
		{"WithVersion", WithVersion, mutexOnly},
		{"WithMaxAttempts", WithMaxAttempts, mutexOnly},
	} {
		out := reflect.TypeOf(tt.result).Out(0)
		for maker, param := range takes {
			want := slices.Contains(strings.Fields(tt.where), maker)
			assert.Equal(t, want, out.AssignableTo(param), "%s (%v) given to %s (...%v)", tt.name, out, maker, param)
		}
	}
	// LeaseOption is what package queue takes for its workers' Locks: every
	// holder's option but WithOwner and WithScope, which a worker sets.
	lease := reflect.TypeFor[LeaseOption]()
	assert.False(t, reflect.TypeOf(WithOwner).Out(0).AssignableTo(lease))
	assert.False(t, reflect.TypeOf(WithScope).Out(0).AssignableTo(lease))
	assert.True(t, reflect.TypeOf(WithLease).Out(0).AssignableTo(lease))
	assert.True(t, reflect.TypeOf(WithTable).Out(0).AssignableTo(lease))
}

// optionParam returns the element type of constructor fn's variadic
// options.
func optionParam(fn any) reflect.Type {
	ft := reflect.TypeOf(fn)
	return ft.In(ft.NumIn() - 1).Elem()
}

// The options that do apply are accepted, and validated as New validates them.
func TestLockAndTableOptionsAccepted(t *testing.T) {
	needEmulator(t)
	client := newClient(t, freshDatabase(t)) // NewLock does no I/O, but needs a real client
	lockOpts := []LockOption{WithTable("Locks"), WithOwner("o"), WithLease(time.Second), WithMaxFailures(2),
		WithJitter(0.1), WithBackOff(defaultBackOff), WithLogger(slog.Default()), WithRenewInterval(100 * time.Millisecond),
		WithFinishTimeout(time.Second), WithScope(NewScope())}
	l, err := NewLock(client, "l", lockOpts...)
	require.NoError(t, err)
	assert.Equal(t, "o", l.cfg.owner)
	assert.Equal(t, 2, l.cfg.maxFailures)
	assert.Equal(t, "Locks", l.cfg.table)
	_, err = NewLock(client, "l", WithLease(time.Millisecond))
	assert.ErrorContains(t, err, "WithLease(1ms)")
	_, err = NewLock(client, "l", nil)
	assert.ErrorContains(t, err, "option 0 is nil")
	f, err := NewFence(client)
	require.NoError(t, err)
	assert.Equal(t, defaultFenceTable, f.table)
	f, err = NewFence(client, WithTable("MyFences"))
	require.NoError(t, err)
	assert.Equal(t, "MyFences", f.table)
	_, err = Inspect(context.Background(), client, "", WithTable("bad-name"))
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

// WithMaxAttempts bounds a Mutex's starts, WithMaxFailures failed calls in
// a row: each sets its own limit.
func TestMaxAttemptsAndMaxFailuresAreApart(t *testing.T) {
	m, err := New(&spanner.Client{}, "s", WithMaxAttempts(7))
	require.NoError(t, err)
	assert.Equal(t, 7, m.cfg.maxAttempts)
	assert.Equal(t, defaultMaxFailures, m.cfg.maxFailures)
	m, err = New(&spanner.Client{}, "s", WithMaxFailures(9))
	require.NoError(t, err)
	assert.Equal(t, defaultMaxAttempts, m.cfg.maxAttempts)
	assert.Equal(t, 9, m.cfg.maxFailures)
}
